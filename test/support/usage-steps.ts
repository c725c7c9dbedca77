/**
 * A scripted turn of model steps that each report usage (100 prompt and 10
 * completion tokens: 110 tokens a step), for the live-usage and budget tests.
 */
import { script } from '../../src/testbed/scripted-model.js';

export const STEP_TOKENS = 110;

const DIRS = ['/usr', '/etc', '/var', '/opt', '/srv', '/home', '/bin', '/lib', '/sbin', '/mnt', '/root', '/tmp', '/'];

/** `n` LS calls, then a reply, each response `slowMs` long. */
export function usageSteps(n: number, slowMs: number): string {
  // Each call differs from the last: droid ends a turn whose model repeats one tool call (measured: after 3).
  const ls = (i: number) => ({ name: 'LS', arguments: { directory_path: DIRS[i % DIRS.length]! } });
  return script({ steps: Array.from({ length: n }, (_, i) => ls(i)), usage: { prompt_tokens: 100, completion_tokens: 10 }, slowMs });
}
