/**
 * The attached Amp MCP server as droid lists it, and what to do about it.
 * Pure: `list_tools` entries in, a plan or a verdict out.
 *
 * droid 0.225.2 names a session-attached server's tools twice:
 * `mcp_<server>_<tool>` (the id) and `<server>___<tool>` (what the model
 * calls, with characters other than [A-Za-z0-9_-] replaced by `_`). Tools
 * are matched by server under either spelling; only the exact `puck` tool
 * is kept usable, everything else of the server is disabled by id.
 */

/** The name the controller attaches the Amp server under. */
export const AMP_SERVER = 'amp-puck';
const PUCK_ID = `mcp_${AMP_SERVER}_puck`;
export const PUCK_LLM_ID = `${AMP_SERVER}___puck`;
const ID_PREFIX = `mcp_${AMP_SERVER}_`;
const LLM_PREFIX = `${AMP_SERVER}___`;

export interface ListedTool {
  id: string;
  llmId?: string;
  currentlyAllowed?: boolean;
}

/** Whether a tool id (either spelling) belongs to the attached Amp server. */
export function isServerToolId(id: string): boolean {
  return id.startsWith(ID_PREFIX) || id.startsWith(LLM_PREFIX);
}

export function isServerTool(tool: ListedTool): boolean {
  return isServerToolId(tool.id) || (tool.llmId !== undefined && isServerToolId(tool.llmId));
}

/** The puck tool itself: both spellings exact (a tool named `puck ` is not it). */
export function isPuck(tool: ListedTool): boolean {
  return tool.id === PUCK_ID && (tool.llmId === undefined || tool.llmId === PUCK_LLM_ID);
}

/** `list_tools` result entries that look like tools; anything else is ignored. */
export function listedTools(result: unknown): ListedTool[] | null {
  const tools = (result as { tools?: unknown } | null)?.tools;
  if (!Array.isArray(tools)) return null;
  return tools.filter((t): t is ListedTool => typeof t === 'object' && t !== null && typeof (t as ListedTool).id === 'string');
}

/**
 * The `disabledToolIds` to set: what the session already disables and droid
 * still knows (so `list_tools` keeps working), minus anything of the Amp
 * server, plus every tool of the server but `puck`, by id.
 */
export function planDisabled(tools: readonly ListedTool[], saved: readonly string[]): string[] {
  const known = new Set<string>();
  for (const t of tools) {
    known.add(t.id);
    if (t.llmId !== undefined) known.add(t.llmId);
  }
  const keep = saved.filter((id) => known.has(id) && !isServerToolId(id));
  const deny = tools.filter((t) => isServerTool(t) && !isPuck(t)).map((t) => t.id);
  return [...new Set([...keep, ...deny])];
}

export type InventoryVerdict =
  { ok: true } | { ok: false; code: 'amp_mcp_admin_tool_exposed'; tools: string[] } | { ok: false; code: 'amp_mcp_tool_missing'; listed: boolean };

/**
 * After disabling: `puck` must be the only usable tool of the server. A tool
 * without a `currentlyAllowed` flag counts as usable (fail closed).
 */
export function verifyInventory(tools: readonly ListedTool[]): InventoryVerdict {
  const exposed = tools.filter((t) => isServerTool(t) && !isPuck(t) && t.currentlyAllowed !== false).map((t) => t.id);
  if (exposed.length > 0) return { ok: false, code: 'amp_mcp_admin_tool_exposed', tools: exposed };
  const puck = tools.find(isPuck);
  if (!puck || puck.currentlyAllowed !== true) return { ok: false, code: 'amp_mcp_tool_missing', listed: puck !== undefined };
  return { ok: true };
}

/** What a credential-less HTTP request to the endpoint showed. */
export type EndpointProbe = { answered: false; detail: string } | { answered: true; status: number };

export type AttachFailureCode = 'amp_mcp_unreachable' | 'amp_mcp_auth_required' | 'amp_mcp_not_started';

/**
 * droid 0.225.2 reports every failed attach the same way (the server is
 * echoed, none of its tools is listed, no reason is given). What can be
 * known without credentials tells the causes apart: no HTTP answer at all
 * (refused, unresolvable, TLS failure, timeout), an answer demanding
 * authorization (401/403), or an answer droid still did not start from.
 */
export function classifyAttachFailure(probe: EndpointProbe): AttachFailureCode {
  if (!probe.answered) return 'amp_mcp_unreachable';
  if (probe.status === 401 || probe.status === 403) return 'amp_mcp_auth_required';
  return 'amp_mcp_not_started';
}

// ── results of puck calls ──────────────────────────────────────────────────

/** Longest reply handle accepted; Amp's are short. */
export const MAX_HANDLE_CHARS = 512;

export function isReplyHandle(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_HANDLE_CHARS && !/[\u0000-\u001f\u007f]/.test(v);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The handle an approved send's result proves: a top-level string
 * `replyHandle` of a JSON object, given as the result string itself or as
 * text blocks. Anything else (no handle, two different ones, another
 * format) proves nothing: null.
 */
export function parseReplyHandle(content: unknown): string | null {
  const texts: string[] = [];
  if (typeof content === 'string') texts.push(content);
  else if (Array.isArray(content)) {
    for (const block of content) {
      if (isRecord(block) && block.type === 'text' && typeof block.text === 'string') texts.push(block.text);
    }
  } else return null;
  const found = new Set<string>();
  for (const text of texts) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      continue;
    }
    if (isRecord(value) && isReplyHandle(value.replyHandle)) found.add(value.replyHandle);
  }
  return found.size === 1 ? [...found][0]! : null;
}
