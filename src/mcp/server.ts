/**
 * One MCP server over the tool registry, independent of transport. What it
 * loads up front is only what initialize and tools/list need: the SDK and
 * the tool listing the build wrote (listing.ts). Tool calls load call-tool.ts
 * (the schemas, the handlers) the first time one arrives.
 */
import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { CallToolRequestSchema, CallToolResultSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { errCode } from '../util/errno.js';
import type { ServerLog, ToolContextSource } from './call-tool.js';
import type { ToolListing } from './listing.js';
import type { ProgressSink } from './progress.js';

export type { ServerLog, ToolContextSource } from './call-tool.js';

const SERVER_NAME = 'droid-mcp';
export const SERVER_VERSION = '0.1.0';

/** Written by the build beside the compiled module (scripts/tool-listing.mjs). */
const TOOL_LISTING_FILE = 'tool-listing.json';

/**
 * The listing as the build wrote it; made from the schemas where there is no
 * build output (this module run from source). Read once, for all servers (the
 * HTTP transport builds many), and synchronously: while the state loads, the
 * thread pool is busy reading modules and state files, and a read queued
 * behind them would hold up the answer.
 */
let listing: Promise<ToolListing[]> | undefined;

async function readListing(): Promise<ToolListing[]> {
  try {
    return JSON.parse(readFileSync(new URL(TOOL_LISTING_FILE, import.meta.url), 'utf8')) as ToolListing[];
  } catch (err) {
    if (errCode(err) !== 'ENOENT') throw err;
    const [{ TOOLS }, { toolListing }] = await Promise.all([import('./tools.js'), import('./listing.js')]);
    return TOOLS.map(toolListing);
  }
}

let calls: typeof import('./call-tool.js') | undefined;
let loadingCalls: Promise<typeof import('./call-tool.js')> | undefined;

/**
 * Loads the call path (the tools' schemas and handlers) and has zod compile
 * the validators a call goes through (zod builds each object schema's fast
 * path the first time it parses one), so the first call pays for neither.
 * Called once the handshake is answered (cli.ts); a call loads it otherwise.
 */
export async function loadCallPath(): Promise<typeof import('./call-tool.js')> {
  if (calls) return calls;
  const loaded = await (loadingCalls ??= import('./call-tool.js'));
  if (!calls) {
    CallToolRequestSchema.safeParse({ method: 'tools/call', params: { name: 'droid_get_session_status', arguments: {}, _meta: {} } });
    CallToolResultSchema.safeParse({ content: [{ type: 'text', text: '{}' }], structuredContent: {} });
    calls = loaded;
  }
  return calls;
}

/**
 * One for all servers: the SDK otherwise builds an Ajv instance per server.
 * It only checks elicitation answers (never requested here) and holds no
 * more than compiled schemas, so sharing it shares nothing of a request.
 */
let validator: AjvJsonSchemaValidator | undefined;
/** Builds that Ajv instance (compiling its meta-schemas) only if a schema is ever checked: never, so far. */
const lazyValidator: jsonSchemaValidator = { getValidator: (schema) => (validator ??= new AjvJsonSchemaValidator()).getValidator(schema) };

export function createMcpServer(ctx: ToolContextSource, log: ServerLog): Server {
  const server = new Server({ name: SERVER_NAME, version: SERVER_VERSION }, { capabilities: { tools: {}, logging: {} }, jsonSchemaValidator: lazyValidator });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await (listing ??= readListing()) }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { callTool } = calls ?? (await loadCallPath());
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
