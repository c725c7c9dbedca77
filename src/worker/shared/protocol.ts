/**
 * The IPC contract between the controller and a per-turn worker. Validated on
 * both sides against the schemas in ipc.ts: a malformed message is reported
 * and ignored, never a guess.
 */
import { z } from 'zod';
import type { WireLaunch } from './worker-process.js';
import { autonomySchema, budgetRecord, tokenUsage } from '../../shared/record-schemas.js';
import type { CatalogModel } from '../../droid/client.js';
import type { ErrorInfo } from '../../droid/errors.js';
import type { TokenUsage } from '../../droid/notifications.js';
import type { PermissionRecord, QuestionRecord } from '../../droid/permission-policy.js';
import type { ProgressEvent, TranscriptEntry } from '../../droid/turn-collector.js';
import type { ChangeSet, ContextStats, EgressEvidence } from '../../shared/evidence-types.js';
import { judgeStop, type TurnOutcome, type TurnStop } from '../../shared/turn-stop.js';

export const turnSpecSchema = z
  .object({
    runId: z.string().min(1),
    workspace: z.string().startsWith('/'),
    /** A checkout session's git folder when its workspace is a subfolder of the checkout: writable for writer turns too (issue 21). */
    alsoWritable: z.array(z.string().startsWith('/')).optional(),
    /** A checkout session's borrowed repository objects (git clone --shared): shown read-only. */
    alsoReadable: z.array(z.string().startsWith('/')).optional(),
    droidPath: z.string().min(1),
    droidEnv: z.record(z.string(), z.string()),
    session: z.discriminatedUnion('mode', [
      z.object({ mode: z.literal('create'), title: z.string().optional(), tags: z.array(z.string()).optional() }).strict(),
      z.object({ mode: z.literal('resume'), droidSessionId: z.string().min(1) }).strict(),
    ]),
    model: z.string().min(1),
    reasoningEffort: z.string().min(1).optional(),
    autonomy: autonomySchema,
    prompt: z.string(),
    timeoutMs: z.number().int().positive(),
    graceMs: z.number().int().positive(),
    machineId: z.string().min(1).optional(),
    /** Operating-system confinement of droid (see sandbox.ts); always stated, never defaulted. */
    sandbox: z.discriminatedUnion('mode', [
      z.object({ mode: z.literal('off') }).strict(),
      z
        .object({
          mode: z.literal('bwrap'),
          bwrapPath: z.string().startsWith('/'),
          network: z
            .discriminatedUnion('mode', [
              z.object({ mode: z.literal('open') }).strict(),
              z
                .object({
                  mode: z.literal('proxy'),
                  allow: z.array(z.string()),
                  modelOnly: z.boolean().optional(),
                  nodePath: z.string().startsWith('/'),
                  helperPath: z.string().startsWith('/'),
                })
                .strict(),
            ])
            .optional(),
          reads: z.object({ hidden: z.array(z.string().startsWith('/')), readable: z.array(z.string().startsWith('/')) }).strict().optional(),
          hiddenDirs: z.array(z.string().startsWith('/')),
          hiddenFiles: z.array(z.string().startsWith('/')),
          /** Set by the runner (runner.ts) for each turn: the private copy droid sees as its sessions folder. */
          sessionsCopy: z.string().startsWith('/').optional(),
          /** Set by the runner too: the turn's private TMPDIR. */
          turnTmp: z.string().startsWith('/').optional(),
        })
        .strict(),
    ]),
    /**
     * JSON Schema of this turn's structured output (checked by output-schema.ts
     * at acceptance). Passed to droid as structuredOutputFormat on the
     * initialize_session or load_session of this turn's droid process.
     */
    outputSchema: z.record(z.string(), z.unknown()).optional(),
    /** Factory title to apply after the turn (best effort), when it changed. */
    renameTo: z.string().min(1).max(200).optional(),
    /**
     * Present only on routed turns: attach the Amp MCP server at `url` as
     * `amp-puck`, preflight it, and route every puck call through the reply
     * gate (the controller). Detached turns never contact it.
     */
    replyBack: z.object({ url: z.string().min(1), replyTo: z.string().min(1) }).strict().optional(),
    /**
     * The turn's spend ceiling (controller/budget/budget-policy.ts): the worker
     * interrupts the turn when droid's running usage reaches it. Absent: none.
     */
    budget: budgetRecord.optional(),
    /**
     * Resumed turns: what the controller recorded the session's earlier turns
     * spent. The running figure's baseline when droid's load_session answer
     * carries no totals (else no running figure, and no budget, could work).
     */
    usageBaseline: tokenUsage.optional(),
  })
  .strict();

export type TurnSpec = z.infer<typeof turnSpecSchema>;

export type { TurnOutcome };

export interface TurnResult {
  /** Why the turn stopped: what the controller records it by (shared/turn-stop.ts). */
  stop: TurnStop;
  /** The stop as the worker judged it (`judgeStop`, a cancel counted as asked for); ipc.ts refuses a result whose outcome is not its stop's. */
  outcome: TurnOutcome;
  /** droid's `agent_turn_completed.reason`, or null when no terminal notification came. */
  reason: string | null;
  /** Whether the prompt reached droid (add_user_message answered). */
  submitted: boolean;
  droidSessionId: string | null;
  finalText: string;
  partialText: string;
  usage: TokenUsage | null;
  permissionsDeclined: PermissionRecord[];
  permissionsApproved: PermissionRecord[];
  questions: QuestionRecord[];
  transcript: TranscriptEntry[];
  error: ErrorInfo | null;
  diagnostics: string[];
  stderrTail: string;
  durationMs: number;
  /**
   * Only when the turn carried an outputSchema: the object droid returned,
   * valid against the schema by our own check; null when none was valid
   * (the error then says why). Absent: no schema was asked for.
   */
  structuredOutput?: Record<string, unknown> | null;
  /** Files the turn changed (evidence/change-set.ts); null: unknown (not a git work tree, or git failed). Absent: the turn was never submitted. */
  changes?: ChangeSet | null;
  /** Context occupancy after the turn; null when droid did not answer. Absent: the turn was never submitted. */
  context?: ContextStats | null;
  /** What the turn's egress proxy refused. Absent: droid had the host's network (or never started). */
  egress?: EgressEvidence;
}

/** RenameOutcome.error when the title was left for a later turn because a follow-up waited. */
export const RENAME_SKIPPED = 'left for a later turn: a follow-up of this session was waiting for its slot';

export interface RenameOutcome {
  title: string;
  ok: boolean;
  error: string | null;
}

/** A puck call droid asked permission for; the controller's reply gate answers. */
export interface ReplyCall {
  toolUseId: string;
  /** The tool input from droid's permission request. */
  input: unknown;
}

/** What the worker saw of puck calls after they ran. */
export type ReplyEvent =
  /** An approved send came back: ok unless droid or Amp reported an error; the handle it proves, if any. */
  | { kind: 'send_result'; toolUseId: string; ok: boolean; handle: string | null }
  /** A tool of the Amp server ran without the gate approving it (droid did not ask). */
  | { kind: 'bypass'; tool: string; toolUseId: string };

/**
 * What a pre-forked (warm) worker prepares before it knows its turn: a droid
 * spawned with the environment a cold one gets, in a neutral private folder,
 * that has not opened a session. Null: only the Node worker is warm (a
 * bubblewrap sandbox's binds must be fixed at spawn, before the workspace is
 * known, so a sandboxed droid is never pre-spawned).
 */
export interface WarmDroidSpec {
  droidPath: string;
  droidEnv: Record<string, string>;
  /** Process cwd of the warm droid: empty, private, used by no other worker. */
  dir: string;
}

/**
 * A turn's start, stage by stage, in the worker (epoch ms, sub-ms): where
 * the time between the controller's take and droid's first model request
 * goes. Logged by the controller and printed by bench/latency.ts.
 */
export const START_STAGES = ['run_received', 'spec_received', 'droid_spawned', 'droid_first_byte', 'initialized', 'session_ready', 'before_snapshot', 'submit_sent', 'submit_answered'] as const;
export type StartStage = (typeof START_STAGES)[number];
export type StartMarks = Partial<Record<StartStage, number>>;

export type WorkerToParent =
  | { type: 'started'; droidSessionId: string; submittedAt: string; stages?: StartMarks }
  /** The models this turn's initialize_session or load_session answered with, and when: the controller's catalog may use them. */
  | { type: 'catalog'; models: CatalogModel[]; answeredAt: string }
  /** A warm worker is ready to take a turn (its droid, if any, is spawned). */
  | { type: 'warm_ready' }
  /** A warm worker's droid died (or could not start) before any turn: the pool drops it. */
  | { type: 'warm_lost'; detail: string }
  | { type: 'progress'; event: ProgressEvent }
  /** The turn's running usage changed (droid's session_token_usage_changed, turn-usage.ts). */
  | { type: 'usage'; usage: TokenUsage }
  | { type: 'terminal'; result: TurnResult }
  | { type: 'rename'; outcome: RenameOutcome }
  | { type: 'reply_call'; id: string; call: ReplyCall }
  | { type: 'reply_event'; event: ReplyEvent };

/** `skip_rename`: a follow-up waits for this turn's slot, so the Factory title is left for a later turn. */
export type ParentToWorker =
  | { type: 'run'; spec: TurnSpec; launch?: WireLaunch }
  /** Sent once, first, to a pool worker: prepare, then wait for `run`. */
  | { type: 'warm'; droid: WarmDroidSpec | null }
  /**
   * To a pool worker holding no droid, before its `run`: start this droid now
   * (a queued turn's, while the claim it waits for is being released); the
   * run's own launch decides whether it is used (run-turn.ts turnDroid).
   */
  | { type: 'launch'; launch: WireLaunch }
  | { type: 'cancel' }
  | { type: 'ack' }
  | { type: 'skip_rename' }
  | { type: 'reply_decision'; id: string; approve: boolean };

/** What a result carries besides its stop and its verdict. */
export type TurnEvidence = Omit<TurnResult, 'stop' | 'outcome' | 'reason' | 'error'>;

const NO_EVIDENCE: TurnEvidence = {
  submitted: false,
  droidSessionId: null,
  finalText: '',
  partialText: '',
  usage: null,
  permissionsDeclined: [],
  permissionsApproved: [],
  questions: [],
  transcript: [],
  diagnostics: [],
  stderrTail: '',
  durationMs: 0,
};

/** A result whose verdict is its stop's, as the worker judges it; evidence absent is empty. */
export function stoppedResult(stop: TurnStop, evidence: Partial<TurnEvidence> = {}): TurnResult {
  const { outcome, reason, error } = judgeStop(stop, true);
  return { ...NO_EVIDENCE, ...evidence, stop, outcome, reason, error };
}

/** A result for a turn that could not run or left no evidence (bad spec, dead worker, refused launch). */
export function failedResult(error: ErrorInfo, evidence: Partial<TurnEvidence> = {}): TurnResult {
  return stoppedResult({ kind: 'failed', error, end: null }, evidence);
}
