/**
 * Output schemas of the tools: records reach callers in the shapes they are
 * stored in.
 */
import { z } from 'zod';
import {
  autonomySchema,
  compactionRecord,
  errorInfo,
  rewindRecord,
  permissionRecord,
  progressRecord,
  questionRecord,
  runState,
  tokenUsage,
} from '../shared/record-schemas.js';
import { budgetOutputs } from './budget-schemas.js';
import { changeSet, contextStats, egressEvidence } from '../shared/evidence-types.js';
import { CHECKOUT_STATES, commitsAhead } from '../shared/checkout-types.js';

// A run's usage carries whether it is droid's final figure.
const usage = budgetOutputs.runUsage(tokenUsage);

export const runView = z.object({
  run: z.string(),
  seq: z.number(),
  state: runState,
  requestKey: z.string().nullable(),
  interrupt: z.boolean(),
  model: z.string(),
  autonomy: z.string(),
  reasoningEffort: z.string().nullable(),
  acceptedAt: z.string(),
  startedAt: z.string().nullable(),
  endedAt: z.string().nullable(),
  cancelReason: z.string().nullable(),
  droidReason: z.string().nullable(),
  error: errorInfo.nullable(),
  usage,
  limit: budgetOutputs.limit,
  needsAttention: z.boolean(),
  permissionsDeclined: z.array(permissionRecord),
  questions: z.array(questionRecord),
  predecessorFailure: z.object({ run: z.string(), state: runState, error: z.object({ code: z.string(), message: z.string() }).nullable() }).nullable(),
  events: z.array(progressRecord),
  structuredOutput: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe('The object the turn returned for its outputSchema, valid by our own check; null when none was asked for or none was valid (see error).'),
  changes: changeSet
    .nullable()
    .describe(
      'Workspace-relative paths the turn added, modified, deleted or renamed, from git state before and after the turn; ' +
        'null = unknown (not a git work tree, git failed, or not recorded). Ignored files and changes outside the workspace ' +
        'are not listed; outsideWorkspace:true means a tool call named a path outside it.',
    ),
  context: contextStats.nullable().describe('Context window occupancy after the turn (tokens used, limit, fraction); above about 0.8, start a fresh session.'),
  commits: commitsAhead
    .nullable()
    .optional()
    .describe(
      'Only for writer turns of a session with its own checkout: the session branch after the turn, its commits ahead of the ' +
        'base (newest first, at most 20 listed), and inRepository (the branch was fast-forwarded in the repository; when false, notBroughtBack says why: diverged, over the 100 MiB a turn may bring back, too slow, or git failed). null: git could not tell.',
    ),
  egress: egressEvidence
    .optional()
    .describe(
      "Turns in the sandbox's own network only: the destinations (host, port) its egress proxy refused, how often, since when and why " +
        '(at most 32 listed, the rest counted in othersRefused). A failed npm install or git fetch shows here; the operator allows a host ' +
        'with the config key network.allow.',
    ),
  rewindTo: z.string().optional().describe('Only for a rewind turn: the run whose start it rewound the session to.'),
  rewind: rewindRecord
    .optional()
    .describe(
      "Only for a rewind turn, once droid did it: files droid's tools had edited, put back (restored), files they had created, removed (deleted), " +
        'each list at most 50 absolute paths (truncated counts the rest); failed: files droid could not put back or remove; notRestorable: files droid no longer had a copy of.',
    ),
  rewoundBy: z.string().optional().describe('Only for runs a later rewind undid: that rewind turn. The run stays in history.'),
  compaction: compactionRecord
    .optional()
    .describe(
      "Only when the conversation was compacted before this turn: auto (the host's autoCompactAt) or asked for, the messages droid replaced by its summary, and the context occupancy before and after.",
    ),
});

const checkoutView = z
  .object({
    isolation: z.literal('worktree'),
    path: z.string().describe('The folder its turns run in.'),
    branch: z.string(),
    base: z.string().nullable().describe('The commit the checkout was made from; null until the first turn made it.'),
    repository: z.string().describe('The repository that keeps the branch.'),
    state: z.enum(CHECKOUT_STATES).describe('pending: made when the first turn starts; ready: on disk; removed: archived away (the branch stays).'),
  })
  .describe('Only for sessions created with isolation "worktree": where the work is.');

export const sessionView = z.object({
  session: z.string(),
  workspace: z.string(),
  title: z.string().nullable(),
  labels: z.array(z.string()),
  archived: z.boolean(),
  replyTo: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  agentState: z.enum(['working', 'idle', 'unknown']),
  needsAttention: z.boolean(),
  notification: z
    .enum(['disabled', 'pending', 'accepted', 'failed', 'not_sent'])
    .describe(
      'What the latest turn did about reporting back, as observed (the controller never sends): disabled = detached; pending = routed and queued or running; ' +
        'accepted = Amp accepted a report (not proof it was read); failed = a report errored, a misroute was attempted, or an Amp tool ran unasked (needs attention, never fails the run); not_sent = ended without a report.',
    ),
  notificationError: z
    .object({ code: z.string(), message: z.string() })
    .nullable()
    .describe('Why notification is failed (reply_misrouted, reply_send_failed, reply_gate_bypassed).'),
  queuedRuns: z.number(),
  preview: z.string(),
  budget: budgetOutputs.session,
  latestRun: runView,
  checkout: checkoutView.optional(),
  network: z
    .literal('model-only')
    .optional()
    .describe('Present when the session was created with network "model-only": its turns reach only the model endpoints.'),
  forkOf: z.object({ session: z.string(), run: z.string() }).optional().describe('Present for forks: the source session, and the run it starts after.'),
});

const admission = z
  .object({
    action: z
      .enum(['started', 'queued', 'interrupting', 'replayed'])
      .describe(
        'started: admitted at once; queued: waits (see waitingFor, capacityFull); interrupting: steering stops the live turn first; replayed: nothing new was queued.',
      ),
    waitingFor: z
      .array(
        z.object({
          session: z.string(),
          run: z.string(),
          state: runState,
          reason: z.enum(['same_session', 'fork_source', 'workspace_lock']),
        }),
      )
      .describe(
        "The turns this one waits for, oldest first: a turn of the same session, a fork's source and the fork's first turn (fork_source), or one holding an overlapping workspace.",
      ),
    capacityFull: z.boolean().describe('Every run slot was taken.'),
    detail: z.string(),
  })
  .describe('What the controller did with the turn.');

export const acceptanceOutput = z.object({
  metadata: z.object({ session: z.string(), run: z.string(), requestKey: z.string(), replayed: z.boolean() }),
  admission,
  status: sessionView,
});

export const statusOutput = z.object({ status: sessionView });

export const waitOutput = z.object({ sessions: z.array(sessionView), timedOut: z.boolean() });

export const workspacesOutput = z.object({
  workspaces: z.array(z.string()),
  capacity: z.object({ maximum: z.number(), active: z.number(), queued: z.number(), available: z.number() }),
  policy: z.object({
    defaultModel: z.string().nullable(),
    defaultAutonomy: autonomySchema,
    maxAutonomy: autonomySchema,
    reasoningEffort: z.string().nullable(),
    runTimeoutMs: z.number(),
    replyBack: z.boolean(),
    /** True: droid_create_session accepts isolation "worktree" (the host has a checkouts directory). */
    worktrees: z.boolean(),
    ceilings: budgetOutputs.ceilings,
    sandbox: z.object({
      mode: z.enum(['bwrap', 'off']),
      /** False: every create, send and catalog read fails sandbox_unavailable until the operator fixes it. */
      available: z.boolean(),
      detail: z.string().nullable(),
    }),
    network: z
      .object({
        mode: z.enum(['proxy', 'open', 'unconfined']),
        allow: z.array(z.string()),
        alwaysAllowed: z.array(z.string()),
      })
      .describe(
        "Whom turns may connect to. proxy: only alwaysAllowed (Factory's API and the custom models' endpoints) and allow (host, *.domain, host:port), " +
          'through a proxy (no DNS inside); a session created with network "model-only" reaches only alwaysAllowed. open: the host\'s network. unconfined: no sandbox.',
      ),
  }),
  droid: z.object({
    version: z.string().nullable().describe('Version of the droid CLI that runs the turns (droid --version); null when it could not be read.'),
  }),
});

export const modelsOutput = z.object({
  models: z.array(
    z.object({
      id: z.string(),
      displayName: z.string().nullable(),
      provider: z.string().nullable(),
      supportedReasoningEfforts: z.array(z.string()),
      defaultReasoningEffort: z.string().nullable(),
    }),
  ),
  defaultModel: z.string().nullable(),
});

const historyItem = z.discriminatedUnion('type', [
  z.object({ type: z.literal('assistant_text'), run: z.string(), text: z.string() }),
  z.object({
    type: z.literal('tool_call'),
    run: z.string(),
    toolUseId: z.string(),
    tool: z.string(),
    input: z.string(),
    status: z.enum(['open', 'done', 'aborted']),
    isError: z.boolean(),
    result: z.string().nullable(),
  }),
  z.object({
    type: z.literal('notice'),
    run: z.string(),
    kind: z.enum(['interrupted', 'cancelled', 'permission_declined', 'question_declined', 'failed', 'timed_out', 'unknown', 'rewind', 'compacted', 'rewound']),
    detail: z.string(),
  }),
  z.object({ type: z.literal('partial_text'), run: z.string(), text: z.string() }),
  z.object({ type: z.literal('structured_output'), run: z.string(), value: z.record(z.string(), z.unknown()) }),
  z.object({ type: z.literal('changes'), run: z.string(), changes: changeSet }),
  z.object({ type: z.literal('commits'), run: z.string(), commits: commitsAhead }),
]);

export const readOutput = z.object({
  items: z.array(historyItem),
  nextCursor: z.string().nullable(),
  historyAvailable: z.boolean(),
  checkout: checkoutView.optional(),
});

export const findOutput = z.object({ sessions: z.array(sessionView), nextCursor: z.string().nullable() });

export const usageOutput = budgetOutputs.usageSummary(tokenUsage);
