/**
 * Opening the turn's droid session before its prompt: a new one
 * (initialize_session) or the session's own (load_session, refused when it
 * was recorded in another directory), with the turn's settings, output
 * format and Amp tools, noting what droid's answer says on the way (when it
 * answered, the usage baseline, the model list).
 */
import { hostname } from 'node:os';
import { realpath } from 'node:fs/promises';
import { disabledToolIdsOf, settingsFor, type DroidClient, type LoadResult, type McpServerSpec } from '../../../droid/client.js';
import { DroidError } from '../../../droid/errors.js';
import { AMP_SERVER } from '../../../droid/amp-tools.js';
import { droidAutonomy } from '../../../droid/permission-policy.js';
import { resumeBaseline, type RawUsage } from '../../../droid/turn-usage.js';
import { epochMs } from '../../../util/epoch.js';
import type { PowerOutcome, StartMarks, TurnSpec } from '../../contract/protocol.js';
import { contextNow, powerApart, type PowerAsked, type SpareDroid } from './session-power.js';
import { relocateFork } from './relocate-fork.js';
import { factoryDirOf } from '../../../shared/host-paths.js';
import { join } from 'node:path';
import { rm } from 'node:fs/promises';
import { sessionFolderName } from '../../../sandbox/session-copy.js';
import { dropStaleAmpDisables, preflightAmp } from '../amp-preflight.js';

/** What opening the session notes for the rest of the turn (run-turn.ts TurnState). */
export interface SessionOpening {
  marks: StartMarks;
  /** The session's usage total when the turn began (zeros: new session; null: droid did not say). */
  baseline: RawUsage | null;
  notes: string[];
  catalog?: { models: unknown; answeredAt: number };
  /** What droid did to the session before the prompt (issue 40), once done. */
  power?: PowerOutcome;
  /** Told as soon as the power is done; the prompt waits until it settles (the controller recorded it). */
  onPower?: (outcome: PowerOutcome) => Promise<void> | void;
  /** Starts a droid of the turn's launch apart from its own (a compaction runs there). */
  spare?: () => Promise<SpareDroid>;
  /** Told before a power starts: from here until it is recorded, a worker that dies leaves the turn's outcome unknown. */
  onPowerStart?: () => void;
}

export async function openSession(spec: TurnSpec, client: DroidClient, state: SessionOpening): Promise<string> {
  const marks = state.marks;
  // A routed turn the caller runs at high runs droid at medium, so every puck call asks (permission-policy.ts).
  const settings = { modelId: spec.model, reasoningEffort: spec.reasoningEffort, ...settingsFor(droidAutonomy(spec.autonomy, spec.replyBack !== undefined)) };
  // Held by the droid process, not the session: given on this turn's initialize or load (docs/PROTOCOL-NOTES.md).
  const format = spec.outputSchema ? { structuredOutputFormat: { type: 'json_schema' as const, schema: spec.outputSchema } } : {};
  // Routed turns only, on create and on every resume (droid does not keep it).
  const mcpServers: McpServerSpec[] | undefined = spec.replyBack ? [{ name: AMP_SERVER, type: 'http', url: spec.replyBack.url }] : undefined;
  if (spec.session.mode === 'create') {
    const created = await client.initializeSession({
      machineId: spec.machineId ?? hostname(),
      cwd: spec.workspace,
      ...settings,
      ...format,
      ...(spec.session.title ? { title: spec.session.title } : {}),
      // droid 0.225 takes tags as objects ({name}), not strings (measured).
      ...(spec.session.tags?.length ? { tags: spec.session.tags.map((name) => ({ name })) } : {}),
      ...(mcpServers && { mcpServers }),
    });
    marks.initialized = epochMs();
    // The same runtime's catalog, at no extra cost: it keeps the controller's catalog fresh (model-catalog.ts).
    if (created.availableModels !== undefined) state.catalog = { models: created.availableModels, answeredAt: marks.initialized };
    await prepareAmpTools(spec, client, disabledToolIdsOf(created.settings));
    return created.sessionId;
  }
  // A session recorded elsewhere must never run its tools in this workspace.
  const check = (answer: LoadResult, directory = spec.workspace) => assertSameDirectory(answer, directory);
  // A fork's first turn, a rewind or a compaction: droid makes a new session first, in a droid of its own.
  const asked = powerAsked(spec);
  let outcome: PowerOutcome | null = null;
  if (asked) {
    outcome = await runAsked(spec, asked, state, check);
    if (outcome) await done(state, outcome);
  }
  const current = outcome ? outcome.droidSessionId : spec.session.mode === 'resume' ? spec.session.droidSessionId : spec.session.sourceDroidSessionId;
  const loaded = await client.loadSession(current, { ...format, ...(mcpServers && { mcpServers }) });
  marks.initialized = epochMs();
  // The same runtime's catalog, reported even when the turn goes no further.
  if (loaded.availableModels !== undefined) state.catalog = { models: loaded.availableModels, answeredAt: marks.initialized };
  await check(loaded);
  if (outcome?.kind === 'compact') await done(state, { ...outcome, compaction: { ...outcome.compaction, after: await contextNow(client) } });
  // The session's totals so far: this turn's running figure is what comes on top (turn-usage.ts).
  const resumed = resumeBaseline(loaded, spec.usageBaseline);
  state.baseline = resumed.baseline;
  if (resumed.note) state.notes.push(resumed.note);
  // A follow-up with unchanged settings skips the round trip (measured ≈ 30–130 ms on a busy host).
  await client.updateSettings(settings, loaded.settings);
  await prepareAmpTools(spec, client, disabledToolIdsOf(loaded.settings));
  return current;
}

/** What the turn asks droid to do before the prompt, or null (issue 40). */
function powerAsked(spec: TurnSpec): PowerAsked | null {
  const session = spec.session;
  if (session.mode === 'fork') {
    const names = { ...(session.title && { title: session.title }), ...(session.tags && { tags: session.tags }) };
    return { kind: 'fork', source: session.sourceDroidSessionId, sourceWorkspace: session.sourceWorkspace ?? spec.workspace, cutAt: session.cutAt, names };
  }
  return session.mode === 'resume' && session.before ? { kind: 'resume', droidSessionId: session.droidSessionId, power: session.before } : null;
}

/**
 * Runs the power, then what it needs to be usable here: a fork into a
 * checkout of its own moves there (relocate-fork.ts), and its source's files
 * leave the turn's sessions copy (the fork's commands have no business
 * reading them). A compaction the host's autoCompactAt asked for that fails
 * is skipped with a note: the turn runs on the conversation as it is.
 */
async function runAsked(
  spec: TurnSpec,
  asked: PowerAsked,
  state: SessionOpening,
  check: (loaded: LoadResult, directory: string) => Promise<void>,
): Promise<PowerOutcome | null> {
  if (!state.spare) throw new DroidError('session_power_failed', 'no droid to run the session power in; nothing was submitted');
  state.onPowerStart?.();
  let outcome: PowerOutcome;
  try {
    outcome = await powerApart(state.spare, asked, spec.workspace, check);
  } catch (err) {
    const auto = asked.kind === 'resume' && asked.power.kind === 'compact' && asked.power.auto;
    if (!auto || (err instanceof DroidError && err.code === 'session_power_unconfirmed')) throw err;
    state.notes.push(`the automatic compaction (autoCompactAt) failed, so the turn ran on the whole conversation: ${(err as Error).message}`);
    return null;
  }
  if (asked.kind === 'fork') {
    if (asked.sourceWorkspace !== spec.workspace) await relocateFork(sessionsDirOf(spec), outcome.droidSessionId, asked.sourceWorkspace, spec.workspace);
    if (spec.sandbox.mode === 'bwrap') {
      const folder = join(sessionsDirOf(spec), sessionFolderName(spec.workspace));
      for (const suffix of ['.jsonl', '.settings.json']) await rm(join(folder, asked.source + suffix), { force: true });
    }
  }
  return outcome;
}

/** droid's sessions folder as this turn's droid sees it: the private copy of a sandboxed turn, else droid's own. */
function sessionsDirOf(spec: TurnSpec): string {
  if (spec.sandbox.mode === 'bwrap') {
    if (!spec.sandbox.sessionsCopy) throw new DroidError('sandbox_unavailable', 'the turn came without its private sessions folder; nothing was submitted');
    return spec.sandbox.sessionsCopy;
  }
  return join(factoryDirOf(spec.droidEnv), 'sessions');
}

/** The power is done: noted for the result, and told at once; settles once the controller recorded it. */
async function done(state: SessionOpening, outcome: PowerOutcome): Promise<void> {
  state.power = outcome;
  await state.onPower?.(outcome);
}

async function assertSameDirectory(loaded: LoadResult, workspace: string): Promise<void> {
  if (!loaded.cwd || !(await sameDirectory(loaded.cwd, workspace))) {
    throw new DroidError(
      'resume_cwd_mismatch',
      `the droid session was recorded in ${loaded.cwd ? JSON.stringify(loaded.cwd) : 'no directory'}, not in ${JSON.stringify(workspace)}; nothing was submitted`,
    );
  }
}

/**
 * Before any prompt: a routed turn's preflight (puck the only usable Amp
 * tool, or a named failure); a detached turn only drops disables of Amp
 * tools a previous routed turn left in the session.
 */
function prepareAmpTools(spec: TurnSpec, client: DroidClient, saved: readonly string[]): Promise<void> {
  return spec.replyBack ? preflightAmp(client, spec.replyBack.url, saved) : dropStaleAmpDisables(client, saved);
}

async function sameDirectory(a: string, b: string): Promise<boolean> {
  const canonical = (p: string) => realpath(p).catch(() => p);
  return (await canonical(a)) === (await canonical(b));
}
