/** The verbose tar listing restore checks an archive with, as GNU tar 1.34 prints it (LC_ALL=C, --quoting-style=c, --numeric-owner). */
import { describe, expect, it } from 'vitest';
import { parseListing } from '../../../../src/ops/state/archive.js';

describe('parseListing', () => {
  it('reads each type, quoted names with escapes and UTF-8 octal bytes, and link targets', () => {
    const listing = [
      'drwxr-xr-x 0/0               0 2026-12-02 06:45 "a/"',
      '-rw-r--r-- 0/0               2 2026-12-02 06:45 "a/b/f \\"q\\" \\303\\274"',
      'prw-r--r-- 0/0               0 2026-12-02 06:45 "a/b/fifo"',
      'hrw-r--r-- 0/0               0 2026-12-02 06:45 "a/b/hl" link to "etc/passwd"',
      'lrwxrwxrwx 0/0               0 2026-12-02 06:45 "a/b/sl" -> "/etc"',
      'crw-rw-rw- 0/0             1,3 2026-12-02 06:45 "a/null"',
      'garbage',
      '',
    ].join('\n');
    expect(parseListing(listing)).toEqual([
      { type: 'd', name: 'a/', target: undefined },
      { type: '-', name: 'a/b/f "q" ü', target: undefined },
      { type: 'p', name: 'a/b/fifo', target: undefined },
      { type: 'h', name: 'a/b/hl', target: 'etc/passwd' },
      { type: 'l', name: 'a/b/sl', target: '/etc' },
      { type: 'c', name: 'a/null', target: undefined },
      undefined,
    ]);
  });
});
