/**
 * Startup refusals of the controller configuration. They go to the operator
 * (stderr at startup), never to MCP callers, so messages may name host paths.
 * `key` is the config key (or `--config` / `platform`) the operator must fix;
 * the message says how, and `action` says what to do then.
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

  get action(): string {
    if (this.key === 'platform') return 'Run droid-mcp on a Linux or macOS host';
    const what = this.key === '--config' ? 'the --config argument' : `"${this.key}" in the config file`;
    return `Fix ${what} as the message says, then start droid-mcp again`;
  }
}

/** A refusal of one key of the config file. */
export function invalid(configPath: string, key: string, text: string): ConfigError {
  return new ConfigError('config_invalid', `Invalid config ${configPath}: "${key}" ${text}`, key);
}
