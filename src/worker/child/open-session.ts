/**
 * Opening the turn's droid session before its prompt: a new one
 * (initialize_session) or the session's own (load_session, refused when it
 * was recorded in another directory), with the turn's settings, output
 * format and Amp tools, noting what droid's answer says on the way (when it
 * answered, the usage baseline, the model list).
 */
import { hostname } from 'node:os';
import { realpath } from 'node:fs/promises';
import { disabledToolIdsOf, settingsFor, type DroidClient, type McpServerSpec } from '../../droid/client.js';
import { DroidError } from '../../droid/errors.js';
import { AMP_SERVER } from '../../droid/amp-tools.js';
import { droidAutonomy } from '../../droid/permission-policy.js';
import { resumeBaseline, type RawUsage } from '../../droid/turn-usage.js';
import { epochMs } from '../../util/epoch.js';
import type { StartMarks, TurnSpec } from '../contract/protocol.js';
import { dropStaleAmpDisables, preflightAmp } from './amp-preflight.js';

/** What opening the session notes for the rest of the turn (run-turn.ts TurnState). */
export interface SessionOpening {
  marks: StartMarks;
  /** The session's usage total when the turn began (zeros: new session; null: droid did not say). */
  baseline: RawUsage | null;
  notes: string[];
  catalog?: { models: unknown; answeredAt: number };
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
  const loaded = await client.loadSession(spec.session.droidSessionId, { ...format, ...(mcpServers && { mcpServers }) });
  marks.initialized = epochMs();
  // The session's totals so far: this turn's running figure is what comes on top (turn-usage.ts).
  const resumed = resumeBaseline(loaded, spec.usageBaseline);
  state.baseline = resumed.baseline;
  if (resumed.note) state.notes.push(resumed.note);
  if (loaded.availableModels !== undefined) state.catalog = { models: loaded.availableModels, answeredAt: marks.initialized };
  // A session recorded elsewhere must never run its tools in this workspace.
  if (!loaded.cwd || !(await sameDirectory(loaded.cwd, spec.workspace))) {
    throw new DroidError('resume_cwd_mismatch', 'the droid session was recorded in a different working directory than this workspace; nothing was submitted');
  }
  // A follow-up with unchanged settings skips the round trip (measured ≈ 30–130 ms on a busy host).
  await client.updateSettings(settings, loaded.settings);
  await prepareAmpTools(spec, client, disabledToolIdsOf(loaded.settings));
  return spec.session.droidSessionId;
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
