/**
 * What a worker is told to run for one admitted turn. Pure: the session and
 * run records plus host settings in, one TurnSpec out.
 */
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import type { TurnSpec } from '../../worker/contract/protocol.js';
import { join } from 'node:path';
import type { SandboxSpec } from '../../sandbox/sandbox.js';
import { egressLaunchOfThisServer } from '../../sandbox/egress/netns.js';
import { alsoReadableOf, alsoWritableOf, turnWorkspace } from '../../worktree/plan.js';
import { replyPrompt } from '../reply-back/reply-prompt.js';

export interface TurnHost {
  droidPath: string;
  droidEnv: Record<string, string>;
  runTimeoutMs: number;
  cancelGraceMs: number;
  sandbox: SandboxSpec;
  /** The configured Amp MCP endpoint; null when reply-back is off. */
  ampMcpUrl: string | null;
  /** Where each session's folder of droid's file snapshots is kept (a sandboxed turn's rewind needs its earlier turns'); absent: none kept. */
  snapshotsRoot?: string;
}

/**
 * What only the launch knows: the caller's output schema (memory only), the turn's spend parts (turn-limit.ts)
 * and how it opens droid's session (session-start.ts; absent: a new one, or the session's own as it is).
 */
export type TurnExtras = Partial<Pick<TurnSpec, 'outputSchema' | 'budget' | 'usageBaseline' | 'session'>>;

/**
 * The whole spec, built here once. A turn is routed when its session is, as
 * it starts (the controller refuses to start a routed turn when reply-back
 * is not configured). Its prompt then starts with the coordination
 * instructions, which are never stored either.
 */
export function turnSpecFor(run: RunRecord, session: SessionRecord, prompt: string, host: TurnHost, extras: TurnExtras = {}): TurnSpec {
  const routed = session.replyTo !== null && host.ampMcpUrl !== null;
  if (routed) {
    prompt = replyPrompt({ replyTo: session.replyTo!, session: session.id, run: run.id, specMode: run.settings.autonomy === 'off' }) + prompt;
  }
  const alsoWritable = alsoWritableOf(session);
  const alsoReadable = alsoReadableOf(session);
  return {
    runId: run.id,
    workspace: turnWorkspace(session),
    ...(alsoWritable.length > 0 ? { alsoWritable } : {}),
    ...(alsoReadable.length > 0 ? { alsoReadable } : {}),
    droidPath: host.droidPath,
    droidEnv: host.droidEnv,
    // The first turn that reaches droid creates its session; later ones resume it.
    session:
      extras.session ??
      (session.droidSessionId
        ? { mode: 'resume', droidSessionId: session.droidSessionId }
        : { mode: 'create', ...(session.title ? { title: session.title } : {}), ...(session.labels.length ? { tags: session.labels } : {}) }),
    model: run.settings.model,
    ...(run.settings.reasoningEffort ? { reasoningEffort: run.settings.reasoningEffort } : {}),
    autonomy: run.settings.autonomy,
    prompt,
    timeoutMs: host.runTimeoutMs,
    graceMs: host.cancelGraceMs,
    sandbox: withSnapshots(sessionSandbox(host.sandbox, session), host.snapshotsRoot, session.id),
    // Applied after the turn, and retried on later turns until it sticks.
    ...(session.title && session.title !== session.factoryTitle ? { renameTo: session.title } : {}),
    ...(routed ? { replyBack: { url: host.ampMcpUrl!, replyTo: session.replyTo! } } : {}),
    ...(extras.outputSchema ? { outputSchema: extras.outputSchema } : {}),
    ...(extras.budget ? { budget: extras.budget } : {}),
    ...(extras.usageBaseline ? { usageBaseline: extras.usageBaseline } : {}),
  };
}

/** A sandboxed turn keeps droid's file snapshots in its session's own folder (issue 40): no other session's turn sees them. */
function withSnapshots(sandbox: SandboxSpec, root: string | undefined, sessionId: string): SandboxSpec {
  return sandbox.mode === 'bwrap' && root ? { ...sandbox, snapshotsDir: join(root, sessionId) } : sandbox;
}

/** The host's sandbox, narrowed to the model endpoints for a session that asked for model-only (issue 37). */
function sessionSandbox(sandbox: SandboxSpec, session: SessionRecord): SandboxSpec {
  if (session.network !== 'model-only' || sandbox.mode !== 'bwrap') return sandbox;
  // An open host still confines this session: its turns get their own proxy, with the model endpoints only.
  const launch = sandbox.network?.mode === 'proxy' ? sandbox.network : { ...egressLaunchOfThisServer(), allow: [] };
  return { ...sandbox, network: { mode: 'proxy', allow: [], modelOnly: true, nodePath: launch.nodePath, helperPath: launch.helperPath } };
}
