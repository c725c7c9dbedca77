/**
 * What tools/list advertises for each tool, made from its zod schemas. The
 * build writes it once to `tool-listing.json` beside the compiled server
 * (scripts/tool-listing.mjs), so answering tools/list loads neither the
 * tools' schemas nor zod's JSON Schema conversion; docs/TOOLS.md is made
 * from the same function.
 */
import { z } from 'zod';
import type { ToolDefinition } from './tools.js';

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

export type ToolListing = ReturnType<typeof toolListing>;
