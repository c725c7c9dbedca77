/**
 * Frozen, memory-lean copies of validated records. With 100k runs in memory
 * the shape of each object matters more than its data:
 *
 * - every record and sub-object is built by one object literal in schema
 *   order, so all of a kind share one hidden class and keep their fields
 *   inline (objects made by JSON.parse or by the schema's copy are larger);
 * - repeated strings (times, models, states, kinds, workspaces, labels) are
 *   shared through a bounded cache, and a run's `sessionId` shares the
 *   session's own id string;
 * - identical small objects (settings, errors, label lists) and every empty
 *   list are shared; that is safe because everything handed out is frozen.
 *
 * The copies are deep: nothing of the input is kept but its strings, so a
 * caller that changes its objects later changes nothing stored.
 */
import type {
  EffectiveSettings,
  ErrorInfo,
  PermissionRecord,
  QuestionRecord,
  ProgressRecord,
  ReplyHandleRecord,
  RunRecord,
  RunReply,
  SessionRecord,
  TokenUsage,
} from '../../shared/records.js';

/** The one empty list every record shares. Typed mutable like the record fields, but frozen: no one can add to it. */
const EMPTY = Object.freeze([]) as unknown as never[];

export interface InternerOptions {
  /** Distinct strings remembered before the string cache starts over. */
  maxStrings: number;
  /** Distinct small shared objects (settings, errors, label lists) remembered before that cache starts over. */
  maxObjects: number;
  /** The stored id string equal to `id`, if that session is known, so runs share it. */
  sessionId?: (id: string) => string | undefined;
}

export class RecordInterner {
  readonly #strings = new Map<string, string>();
  readonly #objects = new Map<string, object>();

  constructor(private readonly options: InternerOptions) {}

  session(s: SessionRecord): SessionRecord {
    const title = s.title;
    return Object.freeze<SessionRecord>({
      id: s.id,
      createdAt: this.#str(s.createdAt),
      updatedAt: this.#str(s.updatedAt),
      workspace: this.#str(s.workspace),
      title,
      labels: s.labels.length === 0 ? EMPTY : this.#shared('l' + JSON.stringify(s.labels), () => freezeList(s.labels, (l) => this.#str(l))),
      archived: s.archived,
      replyTo: s.replyTo === null ? null : this.#sessionId(s.replyTo),
      // Optional: kept absent (undefined, so never written) when absent.
      replyRouteId: s.replyRouteId === undefined ? undefined : this.#str(s.replyRouteId),
      droidSessionId: s.droidSessionId,
      headRunId: s.headRunId,
      factoryTitle: s.factoryTitle !== null && s.factoryTitle === title ? title : s.factoryTitle,
      ...(s.budget !== undefined ? { budget: Object.freeze({ ...s.budget }) } : {}),
      // Optional: kept absent (undefined, so never written) when absent.
      checkout: s.checkout === undefined ? undefined : Object.freeze({ ...s.checkout }),
      ...(s.network !== undefined ? { network: s.network } : {}),
    });
  }

  run(r: RunRecord): RunRecord {
    return Object.freeze<RunRecord>({
      id: r.id,
      sessionId: this.#sessionId(r.sessionId),
      seq: r.seq,
      kind: this.#str(r.kind),
      requestKey: r.requestKey,
      fingerprint: this.#str(r.fingerprint),
      interrupt: r.interrupt,
      settings: this.#settings(r.settings),
      state: this.#str(r.state),
      acceptedAt: this.#str(r.acceptedAt),
      startedAt: this.#maybeStr(r.startedAt),
      endedAt: this.#maybeStr(r.endedAt),
      cancelReason: this.#maybeStr(r.cancelReason),
      reason: this.#maybeStr(r.reason),
      error: this.#error(r.error),
      usage: r.usage === null ? null : usage(r.usage),
      preview: r.preview,
      needsAttention: r.needsAttention,
      permissionsDeclined: freezeList(r.permissionsDeclined, (p) => this.#permission(p)),
      questions: freezeList(r.questions, (q) => this.#question(q)),
      predecessorFailure:
        r.predecessorFailure === null
          ? null
          : Object.freeze({ runId: r.predecessorFailure.runId, state: this.#str(r.predecessorFailure.state), error: this.#error(r.predecessorFailure.error) }),
      events: freezeList(r.events, (e) => this.#event(e)),
      hasResult: r.hasResult,
      // Optional evidence: present only on runs that recorded it, so older runs keep their shape.
      ...evidenceCopy(r),
      ...costCopy(r),
      // Optional: kept absent (undefined, so never written) when absent.
      reply: r.reply === undefined ? undefined : this.#reply(r.reply),
    });
  }

  #reply(r: RunReply): RunReply {
    return Object.freeze<RunReply>({
      routeId: this.#str(r.routeId),
      accepted: r.accepted,
      handles: freezeList(r.handles, (h) => Object.freeze<ReplyHandleRecord>({ handle: h.handle, routeId: this.#str(h.routeId) })),
      failure: this.#error(r.failure),
    });
  }

  #settings(s: EffectiveSettings): EffectiveSettings {
    return this.#shared('s' + JSON.stringify([s.model, s.autonomy, s.reasoningEffort]), () =>
      Object.freeze<EffectiveSettings>({ model: this.#str(s.model), autonomy: this.#str(s.autonomy), reasoningEffort: this.#maybeStr(s.reasoningEffort) }),
    );
  }

  #error(e: ErrorInfo | null): ErrorInfo | null {
    if (e === null) return null;
    return this.#shared('e' + JSON.stringify([e.code, e.message, e.retryable]), () =>
      Object.freeze<ErrorInfo>({ code: this.#str(e.code), message: this.#str(e.message), retryable: e.retryable }),
    );
  }

  #event(e: ProgressRecord): ProgressRecord {
    return Object.freeze<ProgressRecord>({ at: this.#str(e.at), kind: this.#str(e.kind), detail: this.#str(e.detail) });
  }

  #permission(p: PermissionRecord): PermissionRecord {
    return Object.freeze<PermissionRecord>({ tool: this.#str(p.tool), summary: this.#str(p.summary) });
  }

  #question(q: QuestionRecord): QuestionRecord {
    return Object.freeze<QuestionRecord>({ topic: this.#str(q.topic), question: this.#str(q.question), options: freezeList(q.options, (o) => this.#str(o)) });
  }

  #sessionId(id: string): string {
    return this.options.sessionId?.(id) ?? this.#str(id);
  }

  #str<T extends string>(s: T): T {
    const known = this.#strings.get(s);
    if (known !== undefined) return known as T;
    // Starting over keeps the cache bounded; a string seen again is simply cached anew.
    if (this.#strings.size >= this.options.maxStrings) this.#strings.clear();
    this.#strings.set(s, s);
    return s;
  }

  #maybeStr<T extends string>(s: T | null): T | null {
    return s === null ? null : this.#str(s);
  }

  /** `make()`'s frozen result, shared by every caller with the same key. */
  #shared<T extends object>(key: string, make: () => T): T {
    const known = this.#objects.get(key);
    if (known !== undefined) return known as T;
    if (this.#objects.size >= this.options.maxObjects) this.#objects.clear();
    const made = make();
    this.#objects.set(key, made);
    return made;
  }
}

function usage(u: TokenUsage): TokenUsage {
  return Object.freeze<TokenUsage>({
    inputTokens: u.inputTokens,
    outputTokens: u.outputTokens,
    cacheCreationTokens: u.cacheCreationTokens,
    cacheReadTokens: u.cacheReadTokens,
    thinkingTokens: u.thinkingTokens,
    factoryCredits: u.factoryCredits,
  });
}

/** The optional evidence fields of a run, deep-copied and frozen; only those present. */
type EvidenceKey = 'structuredOutput' | 'changes' | 'context' | 'commits' | 'egress';
function evidenceCopy(r: RunRecord): Pick<RunRecord, EvidenceKey> {
  const out: Pick<RunRecord, EvidenceKey> = {};
  if (r.structuredOutput !== undefined) out.structuredOutput = deepFrozenCopy(r.structuredOutput);
  if (r.changes !== undefined) out.changes = deepFrozenCopy(r.changes);
  if (r.commits !== undefined) out.commits = deepFrozenCopy(r.commits);
  if (r.egress !== undefined) out.egress = deepFrozenCopy(r.egress);
  if (r.context !== undefined) out.context = r.context === null ? null : Object.freeze({ used: r.context.used, limit: r.context.limit, fraction: r.context.fraction });
  return out;
}

/** Budget, limit and the live-usage mark, each only when present (older runs keep their shape). */
function costCopy(r: RunRecord): Pick<RunRecord, 'budget' | 'limit' | 'usageLive'> {
  const out: Pick<RunRecord, 'budget' | 'limit' | 'usageLive'> = {};
  if (r.budget !== undefined) out.budget = Object.freeze({ ...r.budget });
  if (r.limit !== undefined) out.limit = Object.freeze({ ...r.limit });
  if (r.usageLive !== undefined) out.usageLive = r.usageLive;
  return out;
}

/** Plain JSON data only (validated records): a structural copy, frozen at every level. */
function deepFrozenCopy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  const copy: unknown = Array.isArray(value) ? value.map(deepFrozenCopy) : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, deepFrozenCopy(v)]));
  return Object.freeze(copy) as T;
}

/** A frozen copy of `list` with each item mapped; the shared empty list if there are none. */
function freezeList<T, U>(list: readonly T[], map: (item: T) => U): U[] {
  if (list.length === 0) return EMPTY;
  const out = new Array<U>(list.length);
  for (let i = 0; i < list.length; i++) out[i] = map(list[i]!);
  return Object.freeze(out) as U[];
}

// ---- compile-time proof that the copies above cannot drop a field ----
// Object literals typed as the record already fail on a missing or unknown
// field; an optional field would slip through, so there must be none except
// the two reply-back fields (absent on records written before reply-back),
// which the literals above name explicitly and the store tests round-trip.
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type NoOptionalFields<T> = Same<Required<T>, T>;
function noOptional<T extends true>(): T | undefined {
  return undefined;
}
noOptional<NoOptionalFields<Omit<SessionRecord, 'replyRouteId' | 'budget' | 'checkout' | 'network'>>>();
// The only optional run fields are reply, the evidence ones (evidenceCopy) and the cost ones (costCopy).
type CostKey = 'budget' | 'limit' | 'usageLive';
noOptional<NoOptionalFields<Omit<RunRecord, EvidenceKey | CostKey | 'reply'>>>();
type OptionalKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? K : never }[keyof T];
noOptional<Same<OptionalKeys<RunRecord>, EvidenceKey | CostKey | 'reply'>>();
noOptional<Same<OptionalKeys<SessionRecord>, 'replyRouteId' | 'budget' | 'checkout' | 'network'>>();
noOptional<NoOptionalFields<RunReply>>();
noOptional<NoOptionalFields<ReplyHandleRecord>>();
noOptional<NoOptionalFields<NonNullable<RunRecord['predecessorFailure']>>>();
noOptional<NoOptionalFields<EffectiveSettings>>();
noOptional<NoOptionalFields<ErrorInfo>>();
noOptional<NoOptionalFields<TokenUsage>>();
noOptional<NoOptionalFields<ProgressRecord>>();
noOptional<NoOptionalFields<PermissionRecord>>();
noOptional<NoOptionalFields<QuestionRecord>>();
