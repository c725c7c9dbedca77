/**
 * Accepting a turn: a new session (`create`) or a follow-up (`send`).
 *
 * The path: checks that need no state, then a replay (same key, same
 * intent: the original acceptance) or a conflict; the I/O (workspace,
 * catalog) outside the chain; in the chain, the records are built and
 * committed, and only then does the turn exist in memory, joining the queue.
 */
import { randomUUID } from 'node:crypto';
import { canonicalJson, checkOutputSchema } from '../evidence/output-schema.js';
import { ControllerError } from '../shared/public-error.js';
import { acceptedRun, type RunRecord, type SessionRecord } from '../shared/records.js';
import { crashPoint } from '../util/crash-point.js';
import type { Admission } from './admission.js';
import { workspaceChanged, type ControllerState } from './controller-state.js';
import { fingerprint, type Intent } from './fingerprint.js';
import { resolveLaunchSettings, type Requested } from './launch-settings.js';
import { normalizeLabels } from './metadata.js';
import { isConversationId, nextRoute, routeOf, withReply } from './reply-route.js';
import type { Steering } from './steering.js';
import type { Turn } from './turn.js';
import type { TurnQueue } from './turn-queue.js';
import type { SessionView } from './views.js';

export interface CreateInput extends Requested {
  requestKey: string;
  workspace: string;
  prompt: string;
  replyTo: string | null;
  title?: string;
  labels?: string[];
  outputSchema?: Record<string, unknown>;
}

export interface SendInput extends Requested {
  requestKey: string;
  session: string;
  prompt: string;
  interrupt?: boolean;
  outputSchema?: Record<string, unknown>;
  /** Omitted: keep the route; a conversation: retarget; null: detach. */
  replyTo?: string | null;
}

export interface Acceptance {
  metadata: { session: string; run: string; requestKey: string; replayed: boolean };
  admission: Admission;
  status: SessionView;
}

/** An acceptance made durable in the chain, reported once the chain is left. */
interface Accepted {
  run: RunRecord;
  turn: Turn;
  admission: Admission;
}

export class TurnAcceptance {
  constructor(
    private readonly state: ControllerState,
    private readonly queue: TurnQueue,
    private readonly steering: Steering,
  ) {}

  async create(input: CreateInput): Promise<Acceptance> {
    this.assertRoutable(input.replyTo);
    const schema = validOutputSchema(input.outputSchema);
    // I/O first, outside the chain: a slow catalog must not hold up anyone's cancel.
    const workspace = await this.state.deps.resolveWorkspace(input.workspace);
    const title = input.title ?? null;
    const labels = normalizeLabels(input.labels ?? []);
    const intent: Intent = { kind: 'create', target: workspace, prompt: input.prompt, interrupt: false, replyTo: input.replyTo, title, labels, ...schemaIntent(schema) };
    // A replay never consults the catalog.
    const early = this.replay(input.requestKey, intent, input);
    if (early) return early;
    this.state.assertRunning();
    const catalog = await this.state.deps.models();

    const accepted = await this.state.serialized(async (): Promise<Acceptance | Accepted> => {
      const replay = this.replay(input.requestKey, intent, input);
      if (replay) return replay;
      this.state.assertRunning();
      this.queue.assertRoom(null);
      const settings = resolveLaunchSettings(input, null, this.state.deps.policy, catalog);
      const at = this.state.now().toISOString();
      const sessionId = randomUUID();
      const route = nextRoute({ replyTo: null, routeId: null }, input.replyTo, randomUUID).route;
      const run = withReply(
        acceptedRun({
          id: randomUUID(),
          sessionId,
          seq: 1,
          kind: 'create',
          requestKey: input.requestKey,
          fingerprint: fingerprint(intent),
          interrupt: false,
          settings,
          acceptedAt: at,
        }),
        route,
      );
      const session: SessionRecord = {
        id: sessionId,
        createdAt: at,
        updatedAt: at,
        workspace,
        title,
        labels,
        archived: false,
        replyTo: route.replyTo,
        replyRouteId: route.routeId ?? undefined,
        droidSessionId: null,
        headRunId: run.id,
        factoryTitle: null,
      };
      await this.state.commit({ sessions: [session], runs: [run] });
      crashPoint('accepted');
      const { turn, admission } = this.queue.enqueue(run, workspace, input.prompt, [], schema);
      return { run, turn, admission };
    });
    return this.report(accepted);
  }

  async send(input: SendInput): Promise<Acceptance> {
    const schema = validOutputSchema(input.outputSchema);
    const session = this.state.session(input.session);
    const interrupt = input.interrupt ?? false;
    const intent: Intent = { kind: 'send', target: session.id, prompt: input.prompt, interrupt, replyTo: input.replyTo, title: null, labels: [], ...schemaIntent(schema) };
    const early = this.replay(input.requestKey, intent, input);
    if (early) return early;
    this.state.assertRunning();
    this.assertRoutable(input.replyTo === undefined ? session.replyTo : input.replyTo);
    // The workspace is fixed for the session: it must still be approved and
    // still resolve to the same directory (no symlink swapped in since).
    if ((await this.state.deps.resolveWorkspace(session.workspace)) !== session.workspace) throw workspaceChanged();
    const catalog = await this.state.deps.models();

    const accepted = await this.state.serialized(async (): Promise<Acceptance | Accepted> => {
      const replay = this.replay(input.requestKey, intent, input);
      if (replay) return replay;
      this.state.assertRunning();
      const runs = this.state.deps.store.runsBySession(session.id);
      if (runs.some((r) => r.state === 'unknown')) {
        throw new ControllerError(
          'session_unknown_outcome',
          'this session has a turn whose outcome is unknown (the controller stopped mid-turn), so it cannot continue',
          'Inspect the workspace and droid history locally, then start a new session with a new requestKey.',
        );
      }
      this.queue.assertRoom(interrupt ? null : session.id);
      const settings = resolveLaunchSettings(input, runs[runs.length - 1]!.settings, this.state.deps.policy, catalog);
      const at = this.state.now().toISOString();
      const current = this.state.session(session.id);
      // A retarget or detach starts a new route from this commit on, whatever becomes of this turn.
      const route = nextRoute(routeOf(current), input.replyTo, randomUUID).route;
      const run = withReply(
        acceptedRun({
          id: randomUUID(),
          sessionId: session.id,
          seq: runs.length + 1,
          kind: 'send',
          requestKey: input.requestKey,
          fingerprint: fingerprint(intent),
          interrupt,
          settings,
          acceptedAt: at,
        }),
        route,
      );
      const stops = interrupt ? this.steering.plan(runs, 'superseded', at) : { dropped: [], stopping: [] };
      const updated: SessionRecord = { ...current, headRunId: run.id, updatedAt: at, archived: false, replyTo: route.replyTo, replyRouteId: route.routeId ?? undefined };
      await this.state.commit({ sessions: [updated], runs: [run, ...stops.dropped, ...stops.stopping] });
      crashPoint('accepted');
      // Committed: now memory follows.
      this.steering.apply(stops);
      const { turn, admission } = this.queue.enqueue(run, current.workspace, input.prompt, stops.stopping, schema);
      return { run, turn, admission };
    });
    return this.report(accepted);
  }

  /** A route needs reply-back configured, and a conversation id. Checked before anything is recorded. */
  private assertRoutable(replyTo: string | null | undefined): void {
    if (replyTo === null || replyTo === undefined) return;
    if (this.state.deps.ampMcpUrl === null) {
      throw new ControllerError(
        'reply_back_unavailable',
        'reply-back is not configured on this host',
        'Pass replyTo: null for detached work and collect results with droid_wait_for_sessions (the operator enables reply-back with "ampMcp" in the config).',
      );
    }
    if (!isConversationId(replyTo)) {
      throw new ControllerError('invalid_arguments', 'replyTo must be an Amp conversation id: T- followed by a lowercase UUID', 'Pass the conversation id, or null for detached work.');
    }
  }

  /** Same key and same intent: the original acceptance. Different: conflict. */
  private replay(requestKey: string, intent: Intent, requested: Requested): Acceptance | undefined {
    const original = this.state.deps.store.runByRequestKey(requestKey);
    if (!original) return undefined;
    const s = original.settings;
    const sameSettings =
      (requested.model === undefined || requested.model === s.model) &&
      (requested.autonomy === undefined || requested.autonomy === s.autonomy) &&
      (requested.reasoningEffort === undefined || requested.reasoningEffort === s.reasoningEffort);
    if (original.fingerprint !== fingerprint(intent) || !sameSettings) {
      throw new ControllerError(
        'request_key_conflict',
        'this requestKey was already used for a different request',
        'Reuse a requestKey only to retry the identical request; use a new key for new work.',
      );
    }
    return {
      metadata: { session: original.sessionId, run: original.id, requestKey, replayed: true },
      admission: { action: 'replayed', waitingFor: [], capacityFull: false, detail: `this requestKey was accepted before; nothing new was queued (the run is ${original.state})` },
      status: this.state.reader.status(original.sessionId),
    };
  }

  /** Outside the chain: a turn admitted at once is reported once its start is recorded, so its status says so. */
  private async report(accepted: Acceptance | Accepted): Promise<Acceptance> {
    if (!('turn' in accepted)) return accepted;
    const { run, turn } = accepted;
    let admission = accepted.admission;
    if (admission.action === 'started') {
      await turn.launched;
      if (turn.inLine()) admission = { ...admission, action: 'queued', detail: 'admitted, but its start could not be recorded; it keeps its place and is retried shortly' };
    }
    return {
      metadata: { session: run.sessionId, run: run.id, requestKey: run.requestKey!, replayed: false },
      admission,
      status: this.state.reader.status(run.sessionId),
    };
  }
}

/**
 * The caller's outputSchema, checked before anything else (size, depth, keys,
 * object root, compiles in ajv): a bad one is `invalid_arguments` with the
 * reason, and nothing is accepted or changed.
 */
function validOutputSchema(schema: unknown): Record<string, unknown> | null {
  if (schema === undefined) return null;
  const check = checkOutputSchema(schema);
  if (!check.ok) {
    throw new ControllerError('invalid_arguments', check.reason, 'Pass outputSchema as a JSON Schema object with "type": "object" at its root, at most 32 KiB serialized, or omit it.');
  }
  return check.schema;
}

function schemaIntent(schema: Record<string, unknown> | null): Pick<Intent, 'outputSchema'> {
  return schema ? { outputSchema: canonicalJson(schema) } : {};
}
