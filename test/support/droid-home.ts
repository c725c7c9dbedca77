// The test bed's droid home (src/testbed/droid-home.ts) with the droid the
// tests run: $DROID_MCP_TEST_DROID, else the pinned CLI.
import { makeDroidBed as makeBed, type DroidBed } from '../../src/testbed/droid-home.js';
import { DROID_PATH } from './paths.js';

export type { DroidBed };

/** Model server + private home + the model id droid assigned, torn down together. */
export function makeDroidBed(): Promise<DroidBed> {
  return makeBed({ droidPath: DROID_PATH });
}
