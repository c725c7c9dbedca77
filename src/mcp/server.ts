/**
 * One MCP server over the tool registry, independent of transport. Inputs
 * are validated here so every rejection has the same `{error: {...}}` shape.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ControllerError, type PublicError } from '../shared/public-error.js';
import { StoreError } from '../store/errors.js';
import { TOOLS, type ToolCall, type ToolContext, type ToolDefinition } from './tools.js';
import type { Log } from '../util/logger.js';
import type { ProgressSink } from './progress.js';

const SERVER_NAME = 'droid-mcp';
export const SERVER_VERSION = '0.1.0';

/** Unexpected tool failures are logged; callers only see a generic error. */
export type ServerLog = Pick<Log, 'error'>;

type ObjectSchema = { type: 'object'; [k: string]: unknown };

/** Draft-07 without a `$schema` URI: the most widely accepted form among MCP clients. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): ObjectSchema {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, target: 'draft-7' }) as ObjectSchema;
  return rest as ObjectSchema;
}

/** The JSON Schema a tool advertises; also used to generate docs/TOOLS.md. */
export function toolListing(def: ToolDefinition) {
  return {
    name: def.name,
    title: def.title,
    description: def.description,
    inputSchema: jsonSchema(def.input, 'input'),
    outputSchema: jsonSchema(def.output, 'output'),
    annotations: { title: def.title, readOnlyHint: def.readOnly, destructiveHint: false, openWorldHint: false },
  };
}

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

export async function callTool(name: string, args: unknown, ctx: ToolContext, log: ServerLog, call: ToolCall = {}): Promise<CallToolResult> {
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
    const structured = (await def.handler(parsed.data, ctx, call)) as Record<string, unknown>;
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

/** Built once: the HTTP transport may build many servers. */
let listing: ReturnType<typeof toolListing>[] | undefined;
/**
 * One for all servers: the SDK otherwise builds an Ajv instance per server.
 * It only checks elicitation answers (never requested here) and holds no
 * more than compiled schemas, so sharing it shares nothing of a request.
 */
let validator: AjvJsonSchemaValidator | undefined;
/** Builds that Ajv instance (compiling its meta-schemas) only if a schema is ever checked: never, so far. */
const lazyValidator: jsonSchemaValidator = { getValidator: (schema) => (validator ??= new AjvJsonSchemaValidator()).getValidator(schema) };

export function createMcpServer(ctx: ToolContext, log: ServerLog): Server {
  const server = new Server({ name: SERVER_NAME, version: SERVER_VERSION }, { capabilities: { tools: {} }, jsonSchemaValidator: lazyValidator });
  listing ??= TOOLS.map(toolListing);
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listing }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const token = request.params._meta?.progressToken;
    const progress: ProgressSink | undefined =
      token === undefined
        ? undefined
        : (update) =>
            // A notification that cannot be sent (client gone, HTTP JSON mode) changes nothing.
            void extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, ...update } }).catch(() => undefined);
    return callTool(request.params.name, request.params.arguments, ctx, log, { signal: extra.signal, ...(progress && { progress }) });
  });
  return server;
}
