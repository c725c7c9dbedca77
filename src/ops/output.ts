/**
 * Standard output of the operator commands (init, doctor, demo, verification
 * scripts): the one place under src/ allowed to write to stdout. The server
 * never imports it (scripts/check.mjs enforces both): in stdio mode its
 * stdout carries MCP frames.
 */
export function out(text = ''): void {
  process.stdout.write(`${text}\n`);
}
