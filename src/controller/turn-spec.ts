/**
 * What a worker is told to run for one admitted turn. Pure: the session and
 * run records plus host settings in, one TurnSpec out.
 */
import type { RunRecord, SessionRecord } from '../store/records.js';
import type { TurnSpec } from '../worker/protocol.js';
import type { SandboxSpec } from '../worker/sandbox.js';

export interface TurnHost {
  droidPath: string;
  droidEnv: Record<string, string>;
  runTimeoutMs: number;
  cancelGraceMs: number;
  sandbox: SandboxSpec;
}

export function turnSpecFor(run: RunRecord, session: SessionRecord, prompt: string, host: TurnHost): TurnSpec {
  return {
    runId: run.id,
    workspace: session.workspace,
    droidPath: host.droidPath,
    droidEnv: host.droidEnv,
    // The first turn that reaches droid creates its session; later ones resume it.
    session: session.droidSessionId
      ? { mode: 'resume', droidSessionId: session.droidSessionId }
      : { mode: 'create', ...(session.title ? { title: session.title } : {}), ...(session.labels.length ? { tags: session.labels } : {}) },
    model: run.settings.model,
    ...(run.settings.reasoningEffort ? { reasoningEffort: run.settings.reasoningEffort } : {}),
    autonomy: run.settings.autonomy,
    prompt,
    timeoutMs: host.runTimeoutMs,
    graceMs: host.cancelGraceMs,
    sandbox: host.sandbox,
    // Applied after the turn, and retried on later turns until it sticks.
    ...(session.title && session.title !== session.factoryTitle ? { renameTo: session.title } : {}),
  };
}
