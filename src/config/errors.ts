/**
 * Startup refusals of the controller configuration. They go to the operator
 * (stderr at startup), never to MCP callers, so messages may name host paths.
 * `key` is the config key (or `--config` / `platform`) the operator must fix.
 */
export type ConfigErrorCode = 'config_invalid' | 'droid_not_found';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly code: ConfigErrorCode,
    message: string,
    readonly key: string,
  ) {
    super(message);
  }
}
