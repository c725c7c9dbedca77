/**
 * The environment a turn's own worker is forked with (a cold turn: no pool).
 * Pure.
 *
 * Node reads every certificate of the file `NODE_EXTRA_CA_CERTS` names when
 * it starts, before its first line of JavaScript: with the system bundle
 * named there (as on this project's hosts) a worker reached its entry in
 * ~106 ms after the fork instead of ~49 ms, and a cold turn's droid is
 * spawned from that entry. A worker opens a TLS connection for one thing
 * only, a routed turn's Amp preflight (worker/child/amp-preflight.ts), so
 * every other turn's worker goes without it. droid's own environment (the
 * spec's `droidEnv`) is not this one and keeps it; so does a pool worker,
 * forked before its turn is known and idle while it boots.
 */
export function coldWorkerEnv(base: NodeJS.ProcessEnv, opensTls: boolean): NodeJS.ProcessEnv {
  if (opensTls || !('NODE_EXTRA_CA_CERTS' in base)) return base;
  const { NODE_EXTRA_CA_CERTS: _readAtBoot, ...env } = base;
  return env;
}
