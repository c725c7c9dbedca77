/**
 * The IPC contract between the controller and a per-turn worker, described
 * once: the zod schemas here are the source, and every message type is
 * inferred from them. Both sides validate what they receive against them
 * (ipc.ts): a malformed message is reported and ignored, never a guess.
 */
import { z } from 'zod';
import { autonomySchema, budgetRecord, compactionRecord, rewindRecord, tokenUsage, touchedFiles } from '../../shared/record-schemas.js';
import { catalogModel, errorInfo, permissionRecord, progressEvent, questionRecord, transcriptEntry, type ErrorInfo } from '../../droid/schemas.js';
import { changeSet, contextStats, egressEvidence } from '../../shared/evidence-types.js';
import { judgeStop, turnOutcomeSchema, turnStopSchema, type TurnOutcome, type TurnStop } from '../../shared/turn-stop.js';

/** What a resumed turn asks droid to do to its session before the prompt (issue 40). */
export const sessionPowerSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('rewind'),
      /** The message (run id) the session goes back to before. */
      toMessage: z.string().min(1),
      /**
       * The runs undone, in order (the first is toMessage's): droid lists a run's
       * file changes and every later one's only from a run that changed a file
       * (measured), so the worker asks from the first until one answers.
       */
      undone: z.array(z.string().min(1)).min(1),
      /** Each file droid's tools changed in the undone runs, as the last of them left it (sha256; null: not there). */
      expect: z.array(z.object({ path: z.string(), sha256: z.string().nullable() }).strict()),
      /** Undone runs whose files were not all recorded: nothing droid would restore can be checked against them. */
      unchecked: z.array(z.string()),
    })
    .strict(),
  z.object({ kind: z.literal('compact'), auto: z.boolean() }).strict(),
]);
export type SessionPower = z.infer<typeof sessionPowerSchema>;

/**
 * What droid did to the session before the prompt (issue 40): the new droid
 * session it made, and what the rewind restored or the compaction removed.
 * Reported at once (`power`) and again with the result.
 */
export const powerOutcomeSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('fork'), droidSessionId: z.string().min(1) }).strict(),
  z.object({ kind: z.literal('rewind'), droidSessionId: z.string().min(1), rewind: rewindRecord }).strict(),
  z.object({ kind: z.literal('compact'), droidSessionId: z.string().min(1), compaction: compactionRecord }).strict(),
]);
export type PowerOutcome = z.infer<typeof powerOutcomeSchema>;

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
      z
        .object({
          mode: z.literal('resume'),
          droidSessionId: z.string().min(1),
          /** Before the prompt (issue 40): rewind to before this message (a run id), or compact the conversation. */
          before: sessionPowerSchema.optional(),
        })
        .strict(),
      /**
       * A fork's first turn (issue 40): opens its source's droid session and
       * forks it whole (`cutAt` null), or cut before that message (a run id).
       */
      z
        .object({
          mode: z.literal('fork'),
          sourceDroidSessionId: z.string().min(1),
          /** Where the source's session runs, when not in this turn's workspace (a fork into a checkout of its own): droid's fork moves here. */
          sourceWorkspace: z.string().startsWith('/').optional(),
          cutAt: z.string().min(1).nullable(),
          title: z.string().optional(),
          tags: z.array(z.string()).optional(),
        })
        .strict(),
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
          reads: z
            .object({ hidden: z.array(z.string().startsWith('/')), readable: z.array(z.string().startsWith('/')) })
            .strict()
            .optional(),
          hiddenDirs: z.array(z.string().startsWith('/')),
          hiddenFiles: z.array(z.string().startsWith('/')),
          /** Set by the runner (runner.ts) for each turn: the private copy droid sees as its sessions folder. */
          sessionsCopy: z.string().startsWith('/').optional(),
          /** Set by the runner too: the turn's private TMPDIR. */
          turnTmp: z.string().startsWith('/').optional(),
          /** The session's own folder of droid's file snapshots (issue 40), kept across its turns for a later rewind; the runner makes it. */
          snapshotsDir: z.string().startsWith('/').optional(),
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
    replyBack: z
      .object({ url: z.string().min(1), replyTo: z.string().min(1) })
      .strict()
      .optional(),
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

export const turnResultSchema = z
  .object({
    /** Why the turn stopped: what the controller records it by (shared/turn-stop.ts). */
    stop: turnStopSchema,
    /** The stop as the worker judged it (`judgeStop`, a cancel counted as asked for). */
    outcome: turnOutcomeSchema,
    /** droid's `agent_turn_completed.reason`, or null when no terminal notification came. */
    reason: z.string().nullable(),
    /** Whether the prompt reached droid (add_user_message answered). */
    submitted: z.boolean(),
    droidSessionId: z.string().min(1).nullable(),
    finalText: z.string(),
    partialText: z.string(),
    usage: tokenUsage.nullable(),
    permissionsDeclined: z.array(permissionRecord),
    permissionsApproved: z.array(permissionRecord),
    questions: z.array(questionRecord),
    transcript: z.array(transcriptEntry),
    error: errorInfo.nullable(),
    diagnostics: z.array(z.string()),
    stderrTail: z.string(),
    // Wall-clock difference: a clock stepped back may make it negative, which is no reason to lose a result.
    durationMs: z.number().finite(),
    /**
     * Only when the turn carried an outputSchema: the object droid returned,
     * valid against the schema by our own check; null when none was valid
     * (the error then says why). Absent: no schema was asked for.
     */
    structuredOutput: z.record(z.string(), z.unknown()).nullable().optional(),
    /** Files the turn changed (evidence/change-set.ts); null: unknown (not a git work tree, or git failed). Absent: the turn was never submitted. */
    changes: changeSet.nullable().optional(),
    /** Context occupancy after the turn; null when droid did not answer. Absent: the turn was never submitted. */
    context: contextStats.nullable().optional(),
    /** What the turn's egress proxy refused. Absent: droid had the host's network (or never started). */
    egress: egressEvidence.optional(),
    /** What droid did to the session before the prompt (issue 40). Absent: nothing, or it did not get that far. */
    power: powerOutcomeSchema.optional(),
    /** Writer turns that reached droid: the files droid's tools changed, as the turn left them (what a later rewind checks). */
    touched: touchedFiles.optional(),
  })
  .strict()
  // A successful turn names its droid session and carries no error; anything else is not a success.
  .refine((r) => r.outcome !== 'succeeded' || (r.error === null && r.droidSessionId !== null && r.submitted), {
    message: 'a succeeded result must be submitted, name its droid session and carry no error',
  })
  // The controller records the stop: a verdict that is not the stop's is a broken worker, not a second opinion.
  .refine((r) => judgeStop(r.stop, true).outcome === r.outcome, { message: "the result's outcome is not its stop's", path: ['outcome'] });
export type TurnResult = z.infer<typeof turnResultSchema>;

/** RenameOutcome.error when the title was left for a later turn because a follow-up waited. */
export const RENAME_SKIPPED = 'left for a later turn: a follow-up of this session was waiting for its slot';

const renameOutcome = z.object({ title: z.string().min(1), ok: z.boolean(), error: z.string().nullable() }).strict();
export type RenameOutcome = z.infer<typeof renameOutcome>;

/** A puck call droid asked permission for; the controller's reply gate answers. */
const replyCall = z
  .object({
    toolUseId: z.string().min(1),
    /** The tool input from droid's permission request, judged by the controller's gate. */
    input: z.unknown(),
  })
  .strict();
export type ReplyCall = z.infer<typeof replyCall>;

/** What the worker saw of puck calls after they ran. */
const replyEvent = z.discriminatedUnion('kind', [
  /** An approved send came back: ok unless droid or Amp reported an error; the handle it proves, if any. */
  z.object({ kind: z.literal('send_result'), toolUseId: z.string().min(1), ok: z.boolean(), handle: z.string().min(1).nullable() }).strict(),
  /** A tool of the Amp server ran without the gate approving it (droid did not ask). */
  z.object({ kind: z.literal('bypass'), tool: z.string(), toolUseId: z.string().min(1) }).strict(),
]);
export type ReplyEvent = z.infer<typeof replyEvent>;

/**
 * What a pre-forked (warm) worker prepares before it knows its turn: a droid
 * spawned with the environment a cold one gets, in a neutral private folder,
 * that has not opened a session. Null: only the Node worker is warm (a
 * bubblewrap sandbox's binds must be fixed at spawn, before the workspace is
 * known, so a sandboxed droid is never pre-spawned).
 */
const warmDroidSpec = z
  .object({
    droidPath: z.string().min(1),
    droidEnv: z.record(z.string(), z.string()),
    /** Process cwd of the warm droid: empty, private, used by no other worker. */
    dir: z.string().startsWith('/'),
  })
  .strict();
export type WarmDroidSpec = z.infer<typeof warmDroidSpec>;

/**
 * The droid launch a cold worker may start before it has loaded itself, as
 * the runner computed it (sandbox/turn-launch.ts); the seccomp program's
 * bytes in base64. The worker uses that droid only if its own launch for
 * the turn is the same (the `run` message is validated in full by then).
 * worker-process.ts converts it, without zod (it is on a cold worker's path).
 */
const wireLaunch = z
  .object({
    droidPath: z.string().min(1),
    env: z.record(z.string(), z.string()),
    cwd: z.string().startsWith('/'),
    launcher: z
      .object({ command: z.string().min(1), args: z.array(z.string()), fd3: z.base64(), egress: z.literal(true).optional() })
      .strict()
      .optional(),
  })
  .strict();
export type WireLaunch = z.infer<typeof wireLaunch>;

/**
 * A turn's start, stage by stage, in the worker (epoch ms, sub-ms): where
 * the time between the controller's take and droid's first model request
 * goes. Logged by the controller and printed by bench/latency.ts.
 */
const START_STAGES = [
  'run_received',
  'spec_received',
  'droid_spawned',
  'droid_first_byte',
  'initialized',
  'session_ready',
  'before_snapshot',
  'submit_sent',
  'submit_answered',
] as const;
const startMarks = z.partialRecord(z.enum(START_STAGES), z.number().finite());
export type StartMarks = z.infer<typeof startMarks>;

export const workerToParentSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('started'), droidSessionId: z.string().min(1), submittedAt: z.iso.datetime(), stages: startMarks.optional() }).strict(),
  /**
   * The models this turn's initialize_session or load_session answered with, and when: the controller's catalog may use them.
   * Never empty: an empty list is no catalog (model-catalog.ts `offer`).
   */
  z.object({ type: z.literal('catalog'), models: z.array(catalogModel).min(1), answeredAt: z.iso.datetime() }).strict(),
  z.object({ type: z.literal('progress'), event: progressEvent }).strict(),
  /** A session power (issue 40) starts: until `power` comes, a worker that dies leaves the outcome unknown. */
  z.object({ type: z.literal('power_started') }).strict(),
  /** droid did its session power (issue 40): recorded before the prompt is submitted. */
  z.object({ type: z.literal('power'), power: powerOutcomeSchema }).strict(),
  /** The turn's running usage changed (droid's session_token_usage_changed, turn-usage.ts). */
  z.object({ type: z.literal('usage'), usage: tokenUsage }).strict(),
  z.object({ type: z.literal('terminal'), result: turnResultSchema }).strict(),
  z.object({ type: z.literal('rename'), outcome: renameOutcome }).strict(),
  z.object({ type: z.literal('reply_call'), id: z.string().min(1), call: replyCall }).strict(),
  z.object({ type: z.literal('reply_event'), event: replyEvent }).strict(),
  /** A warm worker is ready to take a turn (its droid, if any, is spawned). */
  z.object({ type: z.literal('warm_ready') }).strict(),
  /** A warm worker's droid died (or could not start) before any turn: the pool drops it. */
  z.object({ type: z.literal('warm_lost'), detail: z.string() }).strict(),
]);
export type WorkerToParent = z.infer<typeof workerToParentSchema>;

export const parentToWorkerSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('run'), spec: turnSpecSchema, launch: wireLaunch.optional() }).strict(),
  /** Sent once, first, to a pool worker: prepare, then wait for `run`. */
  z.object({ type: z.literal('warm'), droid: warmDroidSpec.nullable() }).strict(),
  /**
   * To a pool worker holding no droid, before its `run`: start this droid now
   * (a queued turn's, while the claim it waits for is being released); the
   * run's own launch decides whether it is used (run-turn.ts turnDroid).
   */
  z.object({ type: z.literal('launch'), launch: wireLaunch }).strict(),
  z.object({ type: z.literal('cancel') }).strict(),
  z.object({ type: z.literal('ack') }).strict(),
  /** A follow-up waits for this turn's slot, so the Factory title is left for a later turn. */
  z.object({ type: z.literal('skip_rename') }).strict(),
  /** The session power the worker reported is recorded (or could not be): its prompt may go now (issue 40). */
  z.object({ type: z.literal('power_recorded') }).strict(),
  z.object({ type: z.literal('reply_decision'), id: z.string().min(1), approve: z.boolean() }).strict(),
]);
export type ParentToWorker = z.infer<typeof parentToWorkerSchema>;

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
