/**
 * The process logger: pino, always to stderr. stdout is the MCP channel in
 * stdio mode, so nothing may log there.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

/** What modules need from a logger: a pino logger fits, and tests can capture it. */
export interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export function createLogger(name = 'droid-mcp'): Logger {
  return pino({ name, level: process.env.DROID_MCP_LOG_LEVEL ?? 'info' }, pino.destination({ dest: 2, sync: true }));
}
