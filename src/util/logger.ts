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

/** Sees every line the logger writes (pino's numeric level, the fields, the message), after stderr's level filter. */
export type LogTap = (level: number, fields: object, message: string) => void;

export function createLogger(name = 'droid-mcp', tap?: LogTap): Logger {
  const hooks: pino.LoggerOptions['hooks'] = tap && {
    logMethod(args, write, level) {
      write.apply(this, args);
      const [first, second] = args as unknown[];
      try {
        // The (fields, message) form every module here uses; a bare message has no fields.
        if (typeof first === 'object' && first !== null) tap(level, first, typeof second === 'string' ? second : '');
        else if (typeof first === 'string') tap(level, {}, first);
      } catch {
        // A tap never costs a line on stderr or the caller's flow.
      }
    },
  };
  return pino({ name, level: process.env.DROID_MCP_LOG_LEVEL ?? 'info', ...(hooks && { hooks }) }, pino.destination({ dest: 2, sync: true }));
}
