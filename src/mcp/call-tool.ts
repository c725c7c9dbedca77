/**
 * One tool call: its arguments validated against the tool's strict schema,
 * its handler run once the tools' context is there, and every rejection in
 * the same `{error: {...}}` shape. Loaded by the MCP server (server.ts) on
 * the first tools/call, so answering initialize and tools/list never loads
 * the tools' schemas or what their handlers import.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { ControllerError, type PublicError } from '../shared/public-error.js';
import { StoreError } from '../store/errors.js';
import { TOOLS, type ToolCall, type ToolContext } from './tools.js';
import type { Log } from '../util/logger.js';

/** Unexpected tool failures are logged; callers only see a generic error. */
export type ServerLog = Pick<Log, 'error'>;

/** The tools' context, or how to wait for it: a stdio server answers the handshake while the state loads (context-gate.ts). */
export type ToolContextSource = ToolContext | (() => Promise<ToolContext>);

/**
 * The rejection travels as JSON text: MCP clients validate any
 * structuredContent against the tool's output schema, errors included.
 */
function errorResult(error: PublicError): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify({ error }) }], isError: true };
}

function invalidArguments(tool: string, issues: z.core.$ZodIssue[]): PublicError {
  const detail = issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join('.') : '(arguments)'}: ${i.message}`)
    .join('; ');
  return {
    code: 'invalid_arguments',
    message: `invalid arguments for ${tool}: ${detail}`,
    retryable: false,
    action: `Fix the arguments to match the ${tool} input schema (see tools/list).`,
  };
}

// zod compiles an object schema's fast path the first time it parses one: done as this module
// loads (once the handshake is answered, see server.ts loadCallPath), not in the first call.
for (const def of TOOLS) def.input.safeParse({});

/** An unknown tool and bad arguments are answered at once; only the handler waits for the context. */
export async function callTool(name: string, args: unknown, ctx: ToolContextSource, log: ServerLog, call: ToolCall = {}): Promise<CallToolResult> {
  const def = TOOLS.find((t) => t.name === name);
  if (!def) {
    return errorResult({
      code: 'unknown_tool',
      message: `there is no tool named ${JSON.stringify(name.slice(0, 100))}`,
      retryable: false,
      action: 'Refresh the tool list; removed tools (droid_start, droid_status, …) have no aliases.',
    });
  }
  const parsed = def.input.safeParse(args ?? {});
  if (!parsed.success) return errorResult(invalidArguments(name, parsed.error.issues));
  try {
    const context = typeof ctx === 'function' ? await ctx() : ctx;
    const structured = (await def.handler(parsed.data, context, call)) as Record<string, unknown>;
    return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
  } catch (err) {
    if (err instanceof ControllerError) return errorResult(err.toPublic());
    if (err instanceof StoreError && err.code === 'state_unreadable') {
      // Its message names state files: those go to the log, never to callers.
      log.error({ err, tool: name }, 'a stored run could not be read back');
      return errorResult({
        code: 'state_unreadable',
        message: 'a stored run could not be read back as the controller verified it at start-up (its state file changed underneath); nothing was guessed',
        retryable: false,
        action: 'Ask the operator to restart the controller: start-up checks the state directory and refuses damaged state.',
      });
    }
    // Unexpected: details to the log only, a generic error to the caller.
    log.error({ err, tool: name }, 'tool failed unexpectedly');
    return errorResult({
      code: 'internal_error',
      message: 'the controller hit an unexpected error; details are in its log',
      retryable: true,
      action: 'Retry with the same requestKey; if it persists, ask the operator to check the controller log.',
    });
  }
}
