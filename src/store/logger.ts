/**
 * The little logging the store needs, as an interface so tests can capture it
 * and the store does not depend on the process logger's full type.
 */
import { createLogger } from '../util/logger.js';

export interface StoreLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export function defaultStoreLogger(): StoreLogger {
  return createLogger('droid-mcp.store');
}
