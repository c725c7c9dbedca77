/**
 * The floor of bench/startup.ts: the least an MCP SDK stdio server does to
 * answer initialize and tools/list with droid-mcp's 11 tools. It lists the
 * tools exactly as droid-mcp answered tools/list earlier in the same run
 * (names, descriptions, input and output schemas), read from the JSON file
 * named by its one argument, and has nothing else: no config, no logger, no
 * state, no schemas of its own. Like droid-mcp it builds no Ajv instance
 * (the SDK otherwise makes one per server for elicitation answers, which
 * neither ever asks for), so the floor is no higher than it must be.
 *
 * Run by the bench: node dist/bench/floor-server.js /path/to/tools.json
 */
import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/** Never called: nothing asks this server to check a schema. */
const never = (): never => {
  throw new Error('the floor server checks no schema');
};
const tools = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as unknown[];
const server = new Server({ name: 'floor', version: '0.0.0' }, { capabilities: { tools: {} }, jsonSchemaValidator: { getValidator: never } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }) as never);
await server.connect(new StdioServerTransport());
