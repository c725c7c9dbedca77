/** Renders docs/TOOLS.md from the registered tool schemas. Pure. */
import { TOOLS } from './tools.js';
import { toolListing } from './listing.js';

export function renderToolsDoc(): string {
  const parts = [
    '# droid-mcp tools',
    '',
    'Generated from the registered tool schemas by `npm run docs`; `npm run check` fails when this file is stale.',
    'Every rejection is an `isError` result whose structured content is `{"error": {"code", "message", "retryable", "action"}}`.',
    '',
  ];
  for (const listing of TOOLS.map(toolListing)) {
    parts.push(
      `## ${listing.name}`,
      '',
      `${listing.title}. ${listing.annotations.readOnlyHint ? 'Read-only.' : 'Changes state.'}`,
      '',
      listing.description,
      '',
      '### Input schema',
      '',
      '```json',
      JSON.stringify(listing.inputSchema, null, 2),
      '```',
      '',
      '### Output schema',
      '',
      '```json',
      JSON.stringify(listing.outputSchema, null, 2),
      '```',
      '',
    );
  }
  return parts.join('\n');
}
