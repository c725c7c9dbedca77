import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { niced } from '../../../src/util/nice.js';

const NICE = ['/usr/bin/nice', '/bin/nice'].find((p) => existsSync(p));

describe.skipIf(!NICE)('niced', () => {
  it('puts nice -n N in front of a launcher, keeping its fd 3 bytes', () => {
    const fd3 = Uint8Array.of(1, 2, 3);
    expect(niced({ command: '/usr/bin/bwrap', args: ['--ro-bind', '/', '/'], fd3 }, 10)).toEqual({
      command: NICE,
      args: ['-n', '10', '/usr/bin/bwrap', '--ro-bind', '/', '/'],
      fd3,
    });
  });

  it('with no launcher, is the launcher that runs the program under nice', () => {
    expect(niced(undefined, 7)).toEqual({ command: NICE, args: ['-n', '7'] });
  });
});
