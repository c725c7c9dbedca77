/**
 * Runs inside a sandbox's network namespace, before droid (netns.ts): opens
 * the proxy's listener on the namespace's loopback and hands it to the
 * process outside over the IPC channel it inherited, then exits. CommonJS
 * with one import: it is on the path of every turn's start.
 */
import { createServer } from 'node:net';

const PORT = Number(process.argv[2] ?? 3128);
const server = createServer();
const fail = (why: string): never => {
  process.stderr.write(`droid-mcp: the sandbox's proxy listener could not start: ${why}\n`);
  process.exit(1);
};
if (typeof process.send !== 'function') fail('no IPC channel');
server.once('error', (err) => fail(err.message));
server.listen({ host: '127.0.0.1', port: PORT, exclusive: true }, () => {
  process.send!({ kind: 'egress-listener', port: PORT }, server, () => process.exit(0));
});
