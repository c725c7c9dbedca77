/**
 * The floors the benches compare droid-mcp with: the least an MCP SDK stdio
 * server does to answer the same requests.
 *  - bench/startup.ts: initialize and tools/list with droid-mcp's 11 tools,
 *    listed exactly as droid-mcp answered tools/list earlier in the same run
 *    (names, descriptions, input and output schemas), from the JSON file
 *    named by the first argument.
 *  - bench/session-scale.ts: a tools/call answered with a result droid-mcp
 *    gave in the same run (the JSON file named by the second argument),
 *    copied and serialized per call as droid-mcp does, computing nothing: what
 *    the SDK's transport and the client cost for an answer of that size.
 * Nothing else: no config, no logger, no state, no schemas of its own. Like
 * droid-mcp it builds no Ajv instance (the SDK otherwise makes one per server
 * for elicitation answers, which neither ever asks for), so the floor is no
 * higher than it must be.
 *
 * Run by the benches: node dist/bench/floor-server.js tools.json [answer.json]
 */
import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/** Never called: nothing asks this server to check a schema. */
const never = (): never => {
  throw new Error('the floor server checks no schema');
};
const tools = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as unknown[];
const server = new Server({ name: 'floor', version: '0.0.0' }, { capabilities: { tools: {} }, jsonSchemaValidator: { getValidator: never } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }) as never);
const answerFile = process.argv[3];
if (answerFile !== undefined) {
  const answer = JSON.parse(readFileSync(answerFile, 'utf8')) as Record<string, unknown>;
  server.setRequestHandler(CallToolRequestSchema, () => {
    const structured = structuredClone(answer);
    return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
  });
}
await server.connect(new StdioServerTransport());
