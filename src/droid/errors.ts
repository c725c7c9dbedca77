/**
 * Named failures of the droid wire client and worker. `code` is stable and
 * user-facing; `retryable` says whether the same request may succeed later.
 */
import type { ErrorInfo } from './schemas.js';

export type DroidErrorCode =
  | 'droid_not_found'
  | 'droid_spawn_failed'
  | 'droid_exited'
  | 'droid_protocol_error'
  | 'droid_request_timeout'
  | 'droid_rpc_error'
  | 'droid_auth_failed'
  | 'droid_turn_failed'
  | 'droid_version_unreadable'
  | 'droid_session_not_found'
  | 'resume_cwd_mismatch'
  // Session powers (issue 40): nothing was submitted.
  | 'rewind_conflict'
  | 'rewind_unavailable'
  | 'session_power_failed'
  | 'session_power_unconfirmed'
  | 'workspace_changed'
  | 'sandbox_unavailable'
  | 'turn_spec_invalid'
  | 'worker_failed'
  // Reply-back preflight (see worker/child/amp-preflight.ts): nothing was submitted.
  | 'amp_mcp_not_started'
  | 'amp_mcp_unreachable'
  | 'amp_mcp_auth_required'
  | 'amp_mcp_tool_missing'
  | 'amp_mcp_admin_tool_exposed'
  | 'amp_mcp_setup_failed';

export class DroidError extends Error {
  override readonly name = 'DroidError';
  constructor(
    readonly code: DroidErrorCode,
    message: string,
    readonly retryable = false,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** JSON-RPC error payload returned by droid for one of our requests. */
export interface RpcErrorBody {
  code: number;
  message: string;
  data?: unknown;
}

export class DroidRpcError extends DroidError {
  constructor(
    readonly method: string,
    readonly rpc: RpcErrorBody,
  ) {
    super(rpc.code === -32004 ? 'droid_session_not_found' : 'droid_rpc_error', `droid rejected ${method}: ${rpc.code} ${rpc.message}`, false, rpc);
  }
}

export type { ErrorInfo };

export function toErrorInfo(err: unknown, fallback: DroidErrorCode = 'worker_failed'): ErrorInfo {
  if (err instanceof DroidError) return { code: err.code, message: err.message, retryable: err.retryable };
  const message = err instanceof Error ? err.message : String(err);
  return { code: fallback, message, retryable: false };
}
