#!/usr/bin/env node
/**
 * Writes what tools/list answers (src/mcp/listing.ts over every tool) to
 * dist/src/mcp/tool-listing.json, beside the compiled server that reads it:
 * answering tools/list then loads neither the tools' zod schemas nor their
 * JSON Schema conversion, which cost more than the rest of our start-up
 * before the first answer. Runs after tsc (npm run build); the stdio
 * e2e test compares what the built server lists with the schemas.
 */
import { writeFileSync } from 'node:fs';

const dist = new URL('../dist/src/mcp/', import.meta.url);
const { TOOLS } = await import(new URL('tools.js', dist).href);
const { toolListing } = await import(new URL('listing.js', dist).href);
// The name server.ts reads (TOOL_LISTING_FILE).
const target = new URL('tool-listing.json', dist);
const text = JSON.stringify(TOOLS.map(toolListing));
writeFileSync(target, text);
