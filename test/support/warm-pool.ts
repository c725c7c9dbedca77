/**
 * The test switch for the warm pool (issue 12): DROID_MCP_TEST_WARM_POOL=0
 * runs every test with the pool off (`warmPoolSize: 0` in every server
 * config a test writes, cold workers in the wire harness); unset or 1 runs
 * with it on, the product default. CI runs both (.ci/run).
 */
const WARM_POOL_VAR = 'DROID_MCP_TEST_WARM_POOL';

export function warmPoolOn(): boolean {
  const value = process.env[WARM_POOL_VAR];
  if (value === undefined || value === '' || value === '1') return true;
  if (value === '0') return false;
  throw new Error(`${WARM_POOL_VAR}=${value}: use 0 (pool off) or 1 (pool on, the default)`);
}

/** Config keys a test server gets from the switch: none when on (the default applies). */
export function warmPoolConfig(): Record<string, unknown> {
  return warmPoolOn() ? {} : { warmPoolSize: 0 };
}
