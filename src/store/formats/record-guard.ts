/**
 * Fast checks that a value parsed from a state file is a valid session or
 * run record, for start-up, where 100k records go through the zod schemas
 * of shared/record-schemas.ts and that check was a third of the time to ready.
 *
 * They answer yes only for values the schemas accept unchanged (no schema
 * involved has defaults or transforms), and may answer no for a value the
 * schemas would accept: the loader then asks zod, which decides and words
 * the refusal. So these checks can make loading faster, never more lenient;
 * test/unit/store/formats/record-guard.test.ts checks that direction against the
 * schemas on generated and damaged records. Pure.
 */
import { AUTONOMY_LEVELS, RUN_STATES, type RunRecord, type SessionRecord } from '../../shared/records.js';

type Obj = Record<string, unknown>;

const SESSION_KEYS = new Set([
  'id',
  'createdAt',
  'updatedAt',
  'workspace',
  'title',
  'labels',
  'archived',
  'replyTo',
  'replyRouteId',
  'droidSessionId',
  'headRunId',
  'factoryTitle',
  'budget',
]);

const RUN_KEYS = new Set([
  'id',
  'sessionId',
  'seq',
  'kind',
  'requestKey',
  'fingerprint',
  'interrupt',
  'settings',
  'state',
  'acceptedAt',
  'startedAt',
  'endedAt',
  'cancelReason',
  'reason',
  'error',
  'usage',
  'preview',
  'needsAttention',
  'permissionsDeclined',
  'questions',
  'predecessorFailure',
  'events',
  'hasResult',
  'reply',
  'budget',
  'limit',
  'usageLive',
]);

const STATES = new Set<string>(RUN_STATES);
const CANCEL_REASONS = new Set(['cancelled', 'superseded', 'queue_lost', 'predecessor_failed', 'interrupt_unconfirmed']);
const AUTONOMY = new Set<string>(AUTONOMY_LEVELS);
const KINDS = new Set(['create', 'send']);

export function isSessionRecord(v: unknown): v is SessionRecord {
  if (!isPlain(v) || !onlyKeys(v, SESSION_KEYS)) return false;
  const routeId = v['replyRouteId'];
  return (
    isId(v['id']) &&
    typeof v['createdAt'] === 'string' &&
    typeof v['updatedAt'] === 'string' &&
    typeof v['workspace'] === 'string' &&
    isStringOrNull(v['title']) &&
    isStringList(v['labels']) &&
    typeof v['archived'] === 'boolean' &&
    isStringOrNull(v['replyTo']) &&
    (routeId === undefined ? !('replyRouteId' in v) : isId(routeId)) &&
    isStringOrNull(v['droidSessionId']) &&
    isId(v['headRunId']) &&
    isStringOrNull(v['factoryTitle']) &&
    isOptional(v, 'budget', isBudget) &&
    // The schema's refinement: a route exactly when there is a recipient.
    (v['replyTo'] === null) === (routeId === undefined)
  );
}

export function isRunRecord(v: unknown): v is RunRecord {
  if (!isPlain(v) || !onlyKeys(v, RUN_KEYS)) return false;
  const seq = v['seq'];
  const reply = v['reply'];
  const predecessor = v['predecessorFailure'];
  return (
    isId(v['id']) &&
    isId(v['sessionId']) &&
    Number.isSafeInteger(seq) &&
    (seq as number) >= 1 &&
    KINDS.has(v['kind'] as string) &&
    isStringOrNull(v['requestKey']) &&
    typeof v['fingerprint'] === 'string' &&
    typeof v['interrupt'] === 'boolean' &&
    isSettings(v['settings']) &&
    STATES.has(v['state'] as string) &&
    typeof v['acceptedAt'] === 'string' &&
    isStringOrNull(v['startedAt']) &&
    isStringOrNull(v['endedAt']) &&
    (v['cancelReason'] === null || CANCEL_REASONS.has(v['cancelReason'] as string)) &&
    isStringOrNull(v['reason']) &&
    (v['error'] === null || isErrorInfo(v['error'])) &&
    (v['usage'] === null || isUsage(v['usage'])) &&
    typeof v['preview'] === 'string' &&
    typeof v['needsAttention'] === 'boolean' &&
    isListOf(v['permissionsDeclined'], isPermission) &&
    isListOf(v['questions'], isQuestion) &&
    (predecessor === null || isPredecessorFailure(predecessor)) &&
    isListOf(v['events'], isEvent) &&
    typeof v['hasResult'] === 'boolean' &&
    (reply === undefined ? !('reply' in v) : isReply(reply)) &&
    isOptional(v, 'budget', isBudget) &&
    isOptional(v, 'limit', isBudget) &&
    isOptional(v, 'usageLive', (x) => x === true)
  );
}

/** An optional key: absent, or present with a valid value (present as undefined is not JSON). */
function isOptional(v: Obj, key: string, valid: (x: unknown) => boolean): boolean {
  return v[key] === undefined ? !(key in v) : valid(v[key]);
}

function isBudget(v: unknown): boolean {
  const tokens = isPlain(v) ? v['maxTokens'] : undefined;
  const credits = isPlain(v) ? v['maxCredits'] : undefined;
  return (
    isPlain(v) &&
    hasExactly(v, 2) &&
    (tokens === null || (Number.isSafeInteger(tokens) && (tokens as number) > 0)) &&
    (credits === null || (typeof credits === 'number' && Number.isFinite(credits) && credits > 0))
  );
}

function isSettings(v: unknown): boolean {
  return (
    isPlain(v) &&
    hasExactly(v, 3) &&
    typeof v['model'] === 'string' &&
    AUTONOMY.has(v['autonomy'] as string) &&
    isStringOrNull(v['reasoningEffort'])
  );
}

function isErrorInfo(v: unknown): boolean {
  return isPlain(v) && hasExactly(v, 3) && isId(v['code']) && typeof v['message'] === 'string' && typeof v['retryable'] === 'boolean';
}

function isUsage(v: unknown): boolean {
  return (
    isPlain(v) &&
    hasExactly(v, 6) &&
    isCount(v['inputTokens']) &&
    isCount(v['outputTokens']) &&
    isCount(v['cacheCreationTokens']) &&
    isCount(v['cacheReadTokens']) &&
    isCount(v['thinkingTokens']) &&
    (v['factoryCredits'] === null || isCount(v['factoryCredits']))
  );
}

function isPermission(v: unknown): boolean {
  return isPlain(v) && hasExactly(v, 2) && typeof v['tool'] === 'string' && typeof v['summary'] === 'string';
}

function isQuestion(v: unknown): boolean {
  return isPlain(v) && hasExactly(v, 3) && typeof v['topic'] === 'string' && typeof v['question'] === 'string' && isStringList(v['options']);
}

function isEvent(v: unknown): boolean {
  return isPlain(v) && hasExactly(v, 3) && typeof v['at'] === 'string' && typeof v['kind'] === 'string' && typeof v['detail'] === 'string';
}

function isPredecessorFailure(v: unknown): boolean {
  return (
    isPlain(v) &&
    hasExactly(v, 3) &&
    isId(v['runId']) &&
    STATES.has(v['state'] as string) &&
    (v['error'] === null || isErrorInfo(v['error']))
  );
}

function isReply(v: unknown): boolean {
  const accepted = v !== null && typeof v === 'object' ? (v as Obj)['accepted'] : undefined;
  return (
    isPlain(v) &&
    hasExactly(v, 4) &&
    isId(v['routeId']) &&
    Number.isSafeInteger(accepted) &&
    (accepted as number) >= 0 &&
    isListOf(v['handles'], (h) => isPlain(h) && hasExactly(h, 2) && isId(h['handle']) && isId(h['routeId'])) &&
    (v['failure'] === null || isErrorInfo(v['failure']))
  );
}

/** A plain object as JSON.parse makes them (so no accessors, no odd prototype). */
function isPlain(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;
}

/** Every own key is one of `allowed` (the named checks then test each one's value). */
function onlyKeys(v: Obj, allowed: ReadonlySet<string>): boolean {
  for (const key of Object.keys(v)) if (!allowed.has(key)) return false;
  return true;
}

/**
 * Exactly `n` own keys. Used where every key is then checked by name: n keys
 * all of which are checked present (undefined fails every check) are exactly
 * the schema's keys.
 */
function hasExactly(v: Obj, n: number): boolean {
  return Object.keys(v).length === n;
}

function isId(v: unknown): boolean {
  return typeof v === 'string' && v.length >= 1;
}

function isStringOrNull(v: unknown): boolean {
  return v === null || typeof v === 'string';
}

function isCount(v: unknown): boolean {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}

function isStringList(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (const item of v) if (typeof item !== 'string') return false;
  return true;
}

function isListOf(v: unknown, item: (x: unknown) => boolean): boolean {
  if (!Array.isArray(v)) return false;
  for (const x of v) if (!item(x)) return false;
  return true;
}
