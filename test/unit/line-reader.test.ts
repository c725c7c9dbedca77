import { describe, expect, it } from 'vitest';
import { LineReader } from '../../src/droid/line-reader.js';

function collect() {
  const values: unknown[] = [];
  const strays: string[] = [];
  const reader = new LineReader({ value: (v) => values.push(v), stray: (line, reason) => strays.push(`${reason}|${line}`) });
  return { reader, values, strays };
}

describe('LineReader', () => {
  it('joins partial lines across chunks, including split UTF-8 characters', () => {
    const { reader, values } = collect();
    const bytes = Buffer.from('{"a":"héllo"}\n{"b":2}\n');
    for (let i = 0; i < bytes.length; i++) reader.push(bytes.subarray(i, i + 1));
    expect(values).toEqual([{ a: 'héllo' }, { b: 2 }]);
  });

  it('keeps stray non-JSON lines as diagnostics and carries on', () => {
    const { reader, values, strays } = collect();
    reader.push('garbage{{\n{"ok":true}\r\n\n  \n');
    expect(values).toEqual([{ ok: true }]);
    expect(strays).toEqual(['not JSON|garbage{{']);
  });

  it('flushes an unterminated last line at end of stream', () => {
    const { reader, values } = collect();
    reader.push('{"last":1}');
    expect(values).toEqual([]);
    reader.end();
    expect(values).toEqual([{ last: 1 }]);
  });
});
