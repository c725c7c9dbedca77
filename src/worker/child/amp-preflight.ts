/**
 * Before any prompt of a routed turn: make the attached Amp server expose
 * `puck` and nothing else, or fail the turn with a named reason. Also the
 * clean-up a detached turn needs when it resumes a session that was routed.
 * The decisions are pure (droid/amp-tools.ts); this is the I/O around them.
 */
import { DroidError, DroidRpcError, type DroidErrorCode } from '../../droid/errors.js';
import type { DroidClient } from '../../droid/client.js';
import {
  AMP_SERVER,
  classifyAttachFailure,
  isServerTool,
  isServerToolId,
  listedTools,
  planDisabled,
  verifyInventory,
  type EndpointProbe,
  type ListedTool,
} from '../../droid/amp-tools.js';

/** Bounds the credential-less HTTP probe of a failed attach. */
const PROBE_TIMEOUT_MS = 5_000;

const NOTHING = 'nothing was submitted';

/** Each preflight failure with what the operator can do about it. */
const ACTION: Record<Extract<DroidErrorCode, `amp_mcp_${string}`>, string> = {
  amp_mcp_unreachable: 'Check that the ampMcp endpoint is reachable from this host (network, DNS, TLS, a local relay that is running), then send again.',
  amp_mcp_auth_required:
    'As the service user, complete Factory droid’s MCP OAuth sign-in once for exactly the configured ampMcp url, then send again; or send with replyTo: null to run detached.',
  amp_mcp_not_started:
    'The endpoint answers HTTP but droid did not start the server: check that the service user’s Factory login holds an Amp OAuth token for exactly this url and that the url is an MCP endpoint (droid’s own log names the cause), then send again.',
  amp_mcp_tool_missing: 'The Amp profile does not offer a usable puck tool: check the ampMcp url (profile=puck), or send with replyTo: null to run detached.',
  amp_mcp_admin_tool_exposed:
    'A tool of the Amp server other than puck stays usable after disabling (a droid or Amp change): do not route sessions until it is understood; send with replyTo: null to run detached, and check the protocol notes for this droid version.',
  amp_mcp_setup_failed: 'droid could not list or configure its tools; retry, and if it persists, check the droid version against the protocol notes.',
};

function fail(code: keyof typeof ACTION, what: string, retryable = false): DroidError {
  return new DroidError(code, `${what}; ${NOTHING}. ${ACTION[code]}`, retryable);
}

/** What a credential-less request to the endpoint shows: only whether and how HTTP answers. */
async function probeEndpoint(url: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<EndpointProbe> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'droid-mcp-preflight', version: '1' } },
      }),
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body?.cancel().catch(() => undefined);
    return { answered: true, status: res.status };
  } catch (err) {
    const cause = (err as { cause?: { code?: unknown } }).cause?.code;
    return { answered: false, detail: typeof cause === 'string' ? cause : err instanceof Error ? err.name : 'error' };
  }
}

/** The two droid calls the preflight makes. */
export type PreflightClient = Pick<DroidClient, 'listTools' | 'setDisabledToolIds'>;

async function list(client: PreflightClient): Promise<ListedTool[]> {
  const tools = listedTools(await client.listTools());
  if (!tools) throw fail('amp_mcp_setup_failed', 'droid.list_tools returned no tool list');
  return tools;
}

function rpcDetail(err: unknown): string {
  if (err instanceof DroidRpcError) return `${err.rpc.code} ${err.rpc.message}`.slice(0, 200);
  return err instanceof Error ? err.message.slice(0, 200) : String(err).slice(0, 200);
}

export interface PreflightOptions {
  probe?: (url: string) => Promise<EndpointProbe>;
}

/**
 * Lists droid's tools, disables every tool of the attached Amp server but
 * `puck` (keeping what the session already disables and droid still knows),
 * lists again and verifies. Throws a DroidError with an `amp_mcp_*` code.
 * `saved` is the session's disabledToolIds as droid reported them on
 * initialize/load.
 */
export async function preflightAmp(client: PreflightClient, url: string, saved: readonly string[], options: PreflightOptions = {}): Promise<void> {
  let tools: ListedTool[];
  try {
    tools = await list(client);
  } catch (err) {
    if (err instanceof DroidError && err.code === 'amp_mcp_setup_failed') throw err;
    // A saved disable of a tool droid no longer knows makes list_tools fail
    // (-32603 "Unknown tool identifier(s)"; droid does not say which): start
    // from no disables, which is harmless while no prompt is submitted.
    try {
      await client.setDisabledToolIds([]);
      tools = await list(client);
    } catch (again) {
      if (again instanceof DroidError && again.code === 'amp_mcp_setup_failed') throw again;
      throw fail('amp_mcp_setup_failed', `droid could not list its tools (${rpcDetail(again)})`, true);
    }
  }

  if (!tools.some(isServerTool)) {
    // droid 0.225.2 gives no reason for a failed attach; the endpoint itself tells what it can.
    const probe = await (options.probe ?? probeEndpoint)(url);
    const code = classifyAttachFailure(probe);
    const seen = probe.answered ? `it answers HTTP ${probe.status}` : `it does not answer HTTP (${probe.detail})`;
    const what =
      code === 'amp_mcp_auth_required'
        ? `droid did not start the ${AMP_SERVER} MCP server and the endpoint demands authorization (HTTP ${probe.answered ? probe.status : '?'})`
        : code === 'amp_mcp_unreachable'
          ? `droid did not start the ${AMP_SERVER} MCP server: the endpoint is unreachable (${seen})`
          : `droid did not start the ${AMP_SERVER} MCP server although ${seen}`;
    throw fail(code, what, code === 'amp_mcp_unreachable');
  }

  const disabled = planDisabled(tools, saved);
  try {
    await client.setDisabledToolIds(disabled);
    tools = await list(client);
  } catch (err) {
    if (err instanceof DroidError && err.code === 'amp_mcp_setup_failed') throw err;
    throw fail('amp_mcp_setup_failed', `droid could not disable the other ${AMP_SERVER} tools (${rpcDetail(err)})`, true);
  }
  const verdict = verifyInventory(tools);
  if (verdict.ok) return;
  if (verdict.code === 'amp_mcp_admin_tool_exposed') {
    throw fail(
      'amp_mcp_admin_tool_exposed',
      `after disabling, ${AMP_SERVER} still exposes ${verdict.tools
        .map((t) => JSON.stringify(t))
        .join(', ')
        .slice(0, 300)}`,
    );
  }
  throw fail(
    'amp_mcp_tool_missing',
    verdict.listed ? `${AMP_SERVER} lists puck but droid does not allow it` : `${AMP_SERVER} is attached but offers no puck tool`,
  );
}

/**
 * A detached turn resuming a session that was routed: droid kept the
 * session's disables of Amp tools it no longer knows (the server is not
 * attached), which breaks `list_tools`. Drop exactly those; nothing is
 * contacted.
 */
export async function dropStaleAmpDisables(client: PreflightClient, saved: readonly string[]): Promise<void> {
  if (!saved.some(isServerToolId)) return;
  await client.setDisabledToolIds(saved.filter((id) => !isServerToolId(id)));
}
