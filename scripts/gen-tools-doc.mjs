#!/usr/bin/env node
// Writes docs/TOOLS.md from the built tool registry (run `npm run build` first).
import { writeFileSync } from 'node:fs';
import { renderToolsDoc } from '../dist/src/mcp/tools-doc.js';

writeFileSync(new URL('../docs/TOOLS.md', import.meta.url), renderToolsDoc());
console.error('docs/TOOLS.md written');
