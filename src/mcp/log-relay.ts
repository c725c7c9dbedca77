/**
 * Which of the server's own log lines an MCP client sees as
 * `notifications/message`, and in what form. Only lines about sessions (they
 * name a session or a run) at info or above are relayed, and of those only an
 * allow-list of fields: handles, states, codes, counts. Never an `err`, a
 * path, free text from droid, a prompt, a token or a droid session id, since
 * those fields are simply not on the list. Pure: the transport sends what this
 * returns.
 */
import type { LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';

export type RelayedLog = LoggingMessageNotification['params'];

/** The fields a relayed line may carry (each a handle, an enum, a code or a number). */
const RELAYED_FIELDS = ['session', 'sessions', 'run', 'state', 'code', 'action', 'waitingFor', 'settled', 'waitedMs', 'timeoutSeconds'] as const;

/** A line is about a caller's sessions when it names one. */
const SESSION_FIELDS = ['session', 'sessions', 'run'] as const;

/** pino's numeric levels to MCP's (RFC 5424) names; below info nothing is relayed. */
function mcpLevel(pinoLevel: number): RelayedLog['level'] | undefined {
  if (pinoLevel >= 60) return 'critical';
  if (pinoLevel >= 50) return 'error';
  if (pinoLevel >= 40) return 'warning';
  if (pinoLevel >= 30) return 'info';
  return undefined;
}

/** What a client is sent for one log line, or undefined when the line is not for it. */
export function relayedLog(pinoLevel: number, fields: object, message: string): RelayedLog | undefined {
  const level = mcpLevel(pinoLevel);
  // Own fields only: nothing inherited is relayed.
  if (level === undefined || !SESSION_FIELDS.some((key) => Object.hasOwn(fields, key))) return undefined;
  const data: Record<string, unknown> = { message };
  const record = fields as Record<string, unknown>;
  for (const key of RELAYED_FIELDS) if (Object.hasOwn(record, key) && record[key] !== undefined) data[key] = record[key];
  return { level, logger: 'droid-mcp', data };
}
