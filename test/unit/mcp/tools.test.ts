import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TOOLS } from '../../../src/mcp/tools.js';

const SRC = join(import.meta.dirname, '../../../src');
/** A name shaped like one of our tools (droid_<verb>_…): what an error's action tells a caller to call. */
const TOOL_SHAPED = /\bdroid_(?:create|send|get|wait|read|cancel|find|update|list)_[a-z_]+\b/g;

describe('the tool names the code tells callers to use', () => {
  it('are all registered tools: an action never sends a caller to a tool that does not exist', () => {
    const registered = new Set(TOOLS.map((t) => t.name));
    const unknown: string[] = [];
    for (const file of readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))) {
      for (const name of readFileSync(join(SRC, file), 'utf8').match(TOOL_SHAPED) ?? []) {
        if (!registered.has(name)) unknown.push(`${file}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
    expect(registered.size).toBe(11);
  });
});
