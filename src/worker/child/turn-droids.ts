/**
 * The droids a turn's worker starts on the turn's own launch: the proxy a
 * sandboxed droid's network goes through, and a droid beside the turn's for
 * a session power (issue 40).
 */
import { DroidClient, SHUTDOWN_BUDGET } from '../../droid/client.js';
import { turnLaunch } from '../../sandbox/turn-launch.js';
import { attachEgress, egressEntries, type TurnEgress } from '../../sandbox/egress/turn-egress.js';
import { factoryDirOf } from '../../shared/host-paths.js';
import type { TurnSpec } from '../contract/protocol.js';
import type { SpareDroid } from './session/session-power.js';

/** droid's own proxy, when the sandbox gives it its own network. */
export function egressOf(spec: TurnSpec, client: DroidClient): TurnEgress | undefined {
  const listener = client.process.egressListener;
  if (!listener || spec.sandbox.mode !== 'bwrap' || spec.sandbox.network?.mode !== 'proxy') return undefined;
  return attachEgress(listener, egressEntries(spec.sandbox.network, factoryDirOf(spec.droidEnv), spec.replyBack ? [spec.replyBack.url] : []));
}

/**
 * A droid of the turn's own launch beside its own (a session power runs
 * there: session-power.ts powerApart), in the worker's process group, so it
 * goes with the turn whatever happens; `close` stops it and its proxy.
 */
export async function spareDroid(spec: TurnSpec): Promise<SpareDroid> {
  const client = DroidClient.spawn(turnLaunch(spec).droid);
  const egress = egressOf(spec, client);
  const close = async () => {
    try {
      await client.shutdown(SHUTDOWN_BUDGET);
    } catch {
      // It is killed with the group at the latest.
    } finally {
      egress?.close();
    }
  };
  try {
    await egress?.ready;
  } catch (err) {
    await close();
    throw err;
  }
  return { client, close };
}
