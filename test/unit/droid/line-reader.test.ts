import { describe, expect, it } from 'vitest';
import { LineReader, MAX_LINE_CHARS, STRAY_HEAD_CHARS, type LineReaderOptions, type StrayLine } from '../../../src/droid/line-reader.js';

function collect(options?: LineReaderOptions) {
  const values: unknown[] = [];
  const strays: StrayLine[] = [];
  const reader = new LineReader({ value: (v) => values.push(v), stray: (s) => strays.push(s) }, options);
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
    expect(strays).toEqual([{ reason: 'not_json', head: 'garbage{{' }]);
  });

  it('flushes an unterminated last line at end of stream', () => {
    const { reader, values } = collect();
    reader.push('{"last":1}');
    expect(values).toEqual([]);
    reader.end();
    expect(values).toEqual([{ last: 1 }]);
  });
});

describe('LineReader line bound', () => {
  it('drops a line over the bound that arrives in many chunks, reports it once as line_too_long, and reads the next line', () => {
    const { reader, values, strays } = collect({ maxLineChars: 20 });
    reader.push('{"a":1}\n["');
    for (let i = 0; i < 10; i++) reader.push('xxxxxxxx');
    reader.push('"]\n{"b":2}\n');
    expect(values).toEqual([{ a: 1 }, { b: 2 }]);
    expect(strays).toHaveLength(1);
    expect(strays[0]).toMatchObject({ reason: 'line_too_long', head: expect.stringMatching(/^\["x+$/) });
    expect(strays[0]!.length).toBeGreaterThan(20);
  });

  it('drops a line over the bound that arrives whole, and accepts one exactly at the bound', () => {
    const { reader, values, strays } = collect({ maxLineChars: 10 });
    const atBound = `"${'y'.repeat(8)}"`; // 10 characters
    const over = `"${'z'.repeat(9)}"`; // 11 characters
    reader.push(`${over}\n${atBound}\n`);
    expect(values).toEqual(['y'.repeat(8)]);
    expect(strays).toEqual([{ reason: 'line_too_long', head: over, length: 11 }]);
  });

  it('the verdict does not depend on how the line was chunked', () => {
    const line = `"${'q'.repeat(30)}"`;
    for (const max of [31, 32]) {
      for (const size of [1, 3, 7, 32, 33, 100]) {
        const { reader, values, strays } = collect({ maxLineChars: max });
        const input = `${line}\n{"n":1}\n`;
        for (let i = 0; i < input.length; i += size) reader.push(input.slice(i, i + size));
        reader.end();
        expect(values).toEqual(max >= 32 ? ['q'.repeat(30), { n: 1 }] : [{ n: 1 }]);
        expect(strays.map((s) => s.reason)).toEqual(max >= 32 ? [] : ['line_too_long']);
      }
    }
  });

  it('quotes at most STRAY_HEAD_CHARS of a dropped line and drops an unterminated too-long tail at end of stream', () => {
    const { reader, values, strays } = collect({ maxLineChars: 1000 });
    reader.push('w'.repeat(5000));
    reader.push('w'.repeat(5000));
    reader.end();
    expect(values).toEqual([]);
    expect(strays).toHaveLength(1);
    expect(strays[0]).toMatchObject({ reason: 'line_too_long', head: 'w'.repeat(STRAY_HEAD_CHARS) });
  });

  it('the default bound is 16 MiB', () => {
    expect(MAX_LINE_CHARS).toBe(16 * 1024 * 1024);
  });
});

describe('LineReader cost', () => {
  it('a 16 MB line in 4 KiB chunks is searched once: characters scanned equal characters pushed', () => {
    const { reader, values, strays } = collect();
    const payload = 'p'.repeat(16_000_000);
    const line = `{"big":"${payload}"}\n{"after":true}\n`;
    const chunk = 4096;
    for (let i = 0; i < line.length; i += chunk) reader.push(line.slice(i, i + chunk));
    expect(strays).toEqual([]);
    expect(values).toHaveLength(2);
    expect((values[0] as { big: string }).big.length).toBe(payload.length);
    // Appending to one buffer and searching it from the start scans ~n²/(2·chunk) ≈ 3·10^10 characters here.
    expect(reader.scannedChars).toBe(line.length);
  });

  it('scanning stays linear with one-byte chunks', () => {
    const { reader, values } = collect();
    const line = `"${'r'.repeat(100_000)}"\n`;
    const bytes = Buffer.from(line);
    for (let i = 0; i < bytes.length; i++) reader.push(bytes.subarray(i, i + 1));
    expect(values).toEqual(['r'.repeat(100_000)]);
    expect(reader.scannedChars).toBe(line.length);
  });
});
