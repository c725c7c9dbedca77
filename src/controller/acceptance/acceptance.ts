/**
 * Accepting a turn: a new session (`create`) or a follow-up (`send`) take
 * one path (`accept`); what differs between them is data (a `Request`).
 *
 * The path: checks that need no state, then a replay (same key, same
 * intent: the original acceptance) or a conflict; the I/O (workspace,
 * catalog) outside the chain; in the chain, the records are built and
 * committed, and only then does the turn exist in memory, joining the queue.
 */
import { randomUUID } from 'node:crypto';
import type { NextTurnDroids } from '../turns/next-turn-droids.js';
import { ControllerError } from '../../shared/public-error.js';
import { acceptedRun, type Budget, type RunRecord, type SessionRecord } from '../../shared/records.js';
import { resolvedWorkspace, turnWorkspace } from '../../worktree/plan.js';
import type { CatalogModel } from '../../droid/client.js';
import { AcceptanceBatches, type Staged } from './acceptance-batch.js';
import type { Admission } from '../turns/admission.js';
import type { CheckoutIntent } from '../checkouts/checkouts.js';
import { workspaceChanged, type ControllerDeps, type ControllerState } from '../controller-state.js';
import { fingerprint, type Intent } from './fingerprint.js';
import { acceptBudget, withBudget } from '../budget/budget-acceptance.js';
import { resolveLaunchSettings } from './turn-settings.js';
import { normalizeLabels } from '../sessions/metadata.js';
import { isConversationId, nextRoute, routeOf, withReply, type Route } from '../reply-back/reply-route.js';
import type { Steering } from './steering.js';
import type { Turn } from '../turns/turn.js';
import type { TurnQueue } from '../turns/turn-queue.js';
import type { SessionView } from '../sessions/views.js';
import { isolationIntent, schemaIntent, sessionNetwork, sessionPowerIntent, validOutputSchema, type CreateInput, type SendInput } from './turn-request.js';
import { forkPoint, rewindTarget } from './session-powers.js';
import type { Isolation } from '../checkouts/checkouts.js';

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

/** What a create and a send differ in; `accept` does the rest. */
interface Request {
  input: CreateInput | SendInput;
  intent: Intent;
  schema: Record<string, unknown> | null;
  /** Checks made once a replay is ruled out, outside the chain (they may need I/O). */
  confirm?: () => Promise<void>;
  /** In the chain, before anything is built: what the new run continues. May refuse. */
  basis(): Basis;
  /** The caller's budget for this turn alone (send), kept on the run. */
  runBudget?: Budget;
  /** What a send asks droid to do before the prompt (issue 40), kept on the run. */
  powers?: Pick<RunRecord, 'rewindTo' | 'compact'>;
}

/** The session a new run belongs to, as it is in the chain. */
interface Basis {
  sessionId: string;
  /** The session's runs so far, in order (none for a new session). */
  runs: RunRecord[];
  /** The session's route now (a new session has none yet). */
  route: Route;
  /** The session record with `run` at its head, on `route`. */
  head(run: RunRecord, route: Route, at: string): SessionRecord;
}

/** A request on its way into the chain, with the catalog read for it. */
interface Submitted {
  request: Request;
  catalog: CatalogModel[];
}

/** A request's records, staged in a batch and not yet committed. */
interface StagedTurn extends Staged {
  request: Request;
  run: RunRecord;
  session: SessionRecord;
  stops: ReturnType<Steering['plan']>;
}

/** The host effects acceptance uses: the catalog, the workspace check, the launch policy, budgets and routing. */
type AcceptanceDeps = Pick<ControllerDeps, 'models' | 'resolveWorkspace' | 'policy' | 'ceilings' | 'sandbox' | 'ampMcpUrl'>;

export class TurnAcceptance {
  private readonly batches: AcceptanceBatches<Submitted, StagedTurn, Acceptance | Accepted>;

  constructor(
    private readonly state: ControllerState,
    private readonly queue: TurnQueue,
    private readonly steering: Steering,
    private readonly nextDroids: NextTurnDroids,
    private readonly deps: AcceptanceDeps,
  ) {
    this.batches = new AcceptanceBatches<Submitted, StagedTurn, Acceptance | Accepted>(state, {
      clash: (earlier, later) => clashes(earlier.request, later.request),
      stage: (submitted, earlier) => this.stage(submitted, earlier),
      land: (staged) => this.land(staged),
    });
  }

  async create(input: CreateInput): Promise<Acceptance> {
    this.assertRoutable(input.replyTo);
    const schema = validOutputSchema(input.outputSchema);
    const budget = acceptBudget(this.deps, 'session', input.budget);
    // I/O first, outside the chain: a slow catalog must not hold up anyone's cancel.
    const workspace = await this.deps.resolveWorkspace(input.workspace);
    const title = input.title ?? null;
    const labels = normalizeLabels(input.labels ?? []);
    const fork = input.forkFrom ? this.forkSource(input.forkFrom.session, workspace, input.isolation) : null;
    const network = sessionNetwork(input.network, this.deps.sandbox, fork);
    const askedPoint = input.forkFrom?.run ?? null;
    const intent: Intent = {
      kind: 'create',
      target: workspace,
      prompt: input.prompt,
      interrupt: false,
      replyTo: input.replyTo,
      title,
      labels,
      ...schemaIntent(schema),
      ...budget.intent,
      ...isolationIntent(input.isolation),
      ...(input.network === 'model-only' || input.network === 'open' ? { network: input.network } : {}),
      ...(fork && { forkFrom: { session: fork.id, run: askedPoint } }),
    };
    let checkout: CheckoutIntent | null = null;
    return this.accept({
      input,
      intent,
      schema,
      confirm: async () => {
        checkout = await this.state.checkouts.intent(input.isolation, input.autonomy, workspace);
      },
      basis: () => {
        budget.assertCeilings();
        // The fork's point, on the source as it is now: its turns may have moved on since the request came.
        const forkOf = fork && { sessionId: fork.id, runId: forkPoint(this.state.store.runsBySession(fork.id), fork.id, askedPoint).id };
        const sessionId = randomUUID();
        const head = (run: RunRecord, route: Route, at: string): SessionRecord => ({
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
          ...budget.session,
          ...(checkout && { checkout: this.state.checkouts.plan(checkout, sessionId, run.settings.autonomy, fork?.checkout?.branch) }),
          ...(network && { network }),
          ...(forkOf && { forkOf }),
        });
        return { sessionId, runs: [], route: { replyTo: null, routeId: null }, head };
      },
    });
  }

  async send(input: SendInput): Promise<Acceptance> {
    const schema = validOutputSchema(input.outputSchema);
    const session = this.state.session(input.session);
    const interrupt = input.interrupt ?? false;
    const budget = acceptBudget(this.deps, 'turn', input.budget);
    const powers = sessionPowerIntent(input);
    const intent: Intent = {
      kind: 'send',
      target: session.id,
      prompt: input.prompt,
      interrupt,
      replyTo: input.replyTo,
      title: null,
      labels: [],
      ...schemaIntent(schema),
      ...budget.intent,
      ...powers,
    };
    return this.accept({
      input,
      intent,
      schema,
      runBudget: budget.turn,
      powers,
      confirm: async () => {
        this.assertRoutable(input.replyTo === undefined ? session.replyTo : input.replyTo);
        // The workspace is fixed for the session: it must still be approved and
        // still resolve to the same directory (no symlink swapped in since).
        const workspace = resolvedWorkspace(session);
        if ((await this.deps.resolveWorkspace(workspace)) !== workspace) throw workspaceChanged();
      },
      basis: () => {
        const runs = this.state.store.runsBySession(session.id);
        if (runs.some((r) => r.state === 'unknown')) {
          throw new ControllerError(
            'session_unknown_outcome',
            'this session has a turn whose outcome is unknown (the controller stopped mid-turn), so it cannot continue',
            'Inspect the workspace and droid history locally, then start a new session with a new requestKey.',
          );
        }
        const current = this.state.session(session.id);
        if (powers.rewindTo !== undefined) rewindTarget(runs, session.id, powers.rewindTo);
        budget.assertLeft(current, runs);
        this.state.checkouts.assertUsable(current);
        const head = (run: RunRecord, route: Route, at: string): SessionRecord => ({
          ...current,
          headRunId: run.id,
          updatedAt: at,
          archived: false,
          replyTo: route.replyTo,
          replyRouteId: route.routeId ?? undefined,
        });
        return { sessionId: session.id, runs, route: routeOf(current), head };
      },
    });
  }

  private async accept(request: Request): Promise<Acceptance> {
    // A replay never consults the catalog.
    const early = this.replay(request);
    if (early) return early;
    this.state.assertRunning();
    if (request.confirm) await request.confirm();
    const catalog = await this.deps.models();
    // In the chain, committed with the acceptances waiting beside it (acceptance-batch.ts).
    return this.report(await this.batches.submit({ request, catalog }));
  }

  /** In the chain: the records of a request not yet committed, built on what is committed and on `earlier` (its batch so far). */
  private stage({ request, catalog }: Submitted, earlier: readonly StagedTurn[]): { staged: StagedTurn } | { answer: Acceptance } {
    const replay = this.replay(request);
    if (replay) return { answer: replay };
    this.state.assertRunning();
    const { input, intent } = request;
    const basis = request.basis();
    // Steering supersedes the session's queued turns, so only the total bounds it
    // (a new session has no queued turns of its own). The batch's earlier turns are not in line yet.
    this.queue.assertRoom(intent.interrupt ? null : basis.sessionId, earlier.length);
    // A follow-up inherits what its session ran last; a new session starts from the host's defaults.
    const settings = resolveLaunchSettings(input, basis.runs.at(-1)?.settings ?? null, this.deps.policy, catalog);
    // A rewind writes the files it puts back: a read-only turn (bound read-only, a reader's lock) cannot do it.
    if (request.powers?.rewindTo !== undefined && settings.autonomy === 'off') {
      throw new ControllerError(
        'rewind_read_only',
        "a rewind puts droid's file changes back, and this turn would run at autonomy off (read-only)",
        'Pass autonomy "low" or higher with rewindTo.',
      );
    }
    const at = this.state.now().toISOString();
    // A retarget or detach starts a new route from this commit on, whatever becomes of this turn.
    const route = nextRoute(basis.route, input.replyTo, randomUUID).route;
    const run: RunRecord = {
      ...withBudget(
        withReply(
          acceptedRun({
            // The id a droid may already be booting for (next-turn-droids.ts).
            id: this.nextDroids.runIdFor(basis.sessionId),
            sessionId: basis.sessionId,
            seq: basis.runs.length + 1,
            kind: intent.kind,
            requestKey: input.requestKey,
            fingerprint: fingerprint(intent),
            interrupt: intent.interrupt,
            settings,
            acceptedAt: at,
          }),
          route,
        ),
        request.runBudget,
      ),
      ...request.powers,
    };
    const stops = intent.interrupt ? this.steering.plan(basis.runs, 'superseded', at) : { dropped: [], stopping: [] };
    const session = basis.head(run, route, at);
    return { staged: { request, run, session, stops, sessions: [session], runs: [run, ...stops.dropped, ...stops.stopping] } };
  }

  /** Committed: now memory follows. */
  private land({ request, run, session, stops }: StagedTurn): Accepted {
    this.steering.apply(stops);
    // A fork that has no droid session yet reads its source's at launch: it takes the source's turn (admission.ts).
    const forkOf = session.forkOf && session.droidSessionId === null ? session.forkOf.sessionId : undefined;
    const { turn, admission } = this.queue.enqueue(run, turnWorkspace(session), request.input.prompt, stops.stopping, request.schema, forkOf);
    return { run, turn, admission };
  }

  /**
   * The session a create forks (issue 40): its workspace is the fork's, and
   * a session with its own checkout is forked into a checkout of the fork's
   * own (never into the workspace or the source's checkout).
   */
  private forkSource(handle: string, workspace: string, isolation: Isolation | undefined): SessionRecord {
    const source = this.state.session(handle);
    if (source.workspace !== workspace) {
      throw new ControllerError(
        'invalid_arguments',
        `a fork works in its source's workspace, ${source.workspace}, not ${workspace}`,
        'Pass the source session\'s workspace (its status shows it), and isolation "worktree" for a checkout of the fork\'s own.',
      );
    }
    if (source.checkout && isolation !== 'worktree') {
      throw new ControllerError(
        'fork_isolation_required',
        "the source session works in its own checkout, which only its turns may change; a fork of it needs a checkout of the fork's own",
        'Pass isolation "worktree": the fork\'s checkout is made from the source\'s branch.',
      );
    }
    return source;
  }

  /** A route needs reply-back configured, and a conversation id. Checked before anything is recorded. */
  private assertRoutable(replyTo: string | null | undefined): void {
    if (replyTo === null || replyTo === undefined) return;
    if (this.deps.ampMcpUrl === null) {
      throw new ControllerError(
        'reply_back_unavailable',
        'reply-back is not configured on this host',
        'Pass replyTo: null for detached work and collect results with droid_wait_for_sessions (the operator enables reply-back with "ampMcp" in the config).',
      );
    }
    if (!isConversationId(replyTo)) {
      throw new ControllerError(
        'invalid_arguments',
        'replyTo must be an Amp conversation id: T- followed by a lowercase UUID',
        'Pass the conversation id, or null for detached work.',
      );
    }
  }

  /** Same key and same intent: the original acceptance. Different: conflict. */
  private replay({ input, intent }: Request): Acceptance | undefined {
    const requestKey = input.requestKey;
    const original = this.state.store.runByRequestKey(requestKey);
    if (!original) return undefined;
    const s = original.settings;
    const sameSettings =
      (input.model === undefined || input.model === s.model) &&
      (input.autonomy === undefined || input.autonomy === s.autonomy) &&
      (input.reasoningEffort === undefined || input.reasoningEffort === s.reasoningEffort);
    if (original.fingerprint !== fingerprint(intent) || !sameSettings) {
      throw new ControllerError(
        'request_key_conflict',
        'this requestKey was already used for a different request',
        'Reuse a requestKey only to retry the identical request; use a new key for new work.',
      );
    }
    return {
      metadata: { session: original.sessionId, run: original.id, requestKey, replayed: true },
      admission: {
        action: 'replayed',
        waitingFor: [],
        capacityFull: false,
        detail: `this requestKey was accepted before; nothing new was queued (the run is ${original.state})`,
      },
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
      if (turn.inLine())
        admission = { ...admission, action: 'queued', detail: 'admitted, but its start could not be recorded; it keeps its place and is retried shortly' };
    }
    return {
      metadata: { session: run.sessionId, run: run.id, requestKey: run.requestKey!, replayed: false },
      admission,
      status: this.state.reader.status(run.sessionId),
    };
  }
}

/**
 * Requests that may not share a batch: the later must see the earlier
 * committed. The same request key (a replay or a conflict); the same session
 * (its runs, seq and head); two new sessions with checkouts (the host's
 * checkout limit counts committed sessions).
 */
function clashes(earlier: Request, later: Request): boolean {
  if (earlier.input.requestKey === later.input.requestKey) return true;
  if (earlier.intent.kind === 'send' && later.intent.kind === 'send') return earlier.intent.target === later.intent.target;
  return earlier.intent.isolation === 'worktree' && later.intent.isolation === 'worktree';
}
