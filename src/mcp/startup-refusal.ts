/**
 * What an MCP client is told when start-up failed after its handshake was
 * answered (cli.ts: the state directory is opened only then). The code is
 * the refusal's own; the words name no host path (the log line the operator
 * reads does, with the exact fix), and retrying never helps: the server
 * answers every tool call with this until it exits.
 */
import { ControllerError } from '../shared/public-error.js';
import { StoreError, type StoreErrorCode } from '../store/errors.js';

const WHY: Partial<Record<StoreErrorCode, string>> = {
  state_dir_not_private: 'its state directory is not private to the user it runs as',
  state_locked: 'another controller owns its state directory or is starting on it, or a backup or restore runs on it',
  state_owned_elsewhere: 'its state directory belongs to a controller on another host, user or Factory home',
  state_corrupt: 'a file in its state directory is damaged; nothing was changed',
  state_version_unsupported: 'its state directory was written by another release; nothing was changed',
  state_write_failed: 'opening its state directory failed on a disk error; nothing was stored',
};

export function startupRefusal(err: unknown): ControllerError {
  const code = err instanceof StoreError ? err.code : 'startup_failed';
  const why = (err instanceof StoreError && WHY[err.code]) || 'an unexpected error while opening its state directory';
  return new ControllerError(
    code,
    `droid-mcp refused to start: ${why}. It serves no tool call and exits when this client disconnects`,
    `Ask the operator to read the controller's log (stderr): its "refusing to start" line (${code}) names the file and the fix. Then restart this MCP server; retrying the call does not help.`,
  );
}
