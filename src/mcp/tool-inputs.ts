/**
 * Input schemas of the tools. Strict: an unknown argument is an error,
 * never silently ignored.
 */
import { z } from 'zod';
import { autonomySchema } from '../shared/record-schemas.js';
import { budgetInput, spendFilters } from './budget-schemas.js';
import { MAX_LABEL_CHARS, MAX_LABELS } from '../controller/sessions/metadata.js';
import { CONVERSATION_ID } from '../controller/reply-back/reply-route.js';

const requestKey = z.string().min(1).max(200).describe('Stable idempotency key: retry with the same key and identical arguments.');
const sessionHandle = z.string().min(1).max(100).describe('Session handle returned by droid_create_session (metadata.session).');
const runHandle = z.string().min(1).max(100).describe('Run id (metadata.run of an acceptance, latestRun.run of a status).');
const prompt = z.string().min(1).max(100_000).describe('The message for droid. Never stored by the controller.');
const model = z.string().min(1).max(200).describe('Model id from droid_models. Omit to use the launch default.');
const reasoningEffort = z.string().min(1).max(50).describe('Reasoning effort supported by the model (see droid_models).');
const outputSchema = z
  .record(z.string(), z.unknown())
  .describe(
    'JSON Schema (object root, at most 32 KiB serialized) the turn must answer with. droid offers the model a StructuredOutput ' +
      'tool; the object is checked again here and shown as latestRun.structuredOutput. No valid object: the run fails with ' +
      'structured_output_missing or structured_output_invalid.',
  );
const conversation = z.string().regex(CONVERSATION_ID, 'a conversation id is T- followed by a lowercase UUID');
const label = z
  .string()
  .min(1)
  .max(MAX_LABEL_CHARS)
  .regex(/^[a-z0-9][a-z0-9._:-]*$/, 'labels are lowercase letters, digits and . _ : -');

export const createInput = z.strictObject({
  requestKey,
  workspace: z.string().min(1).max(4096).describe('Absolute path of an approved root or a directory inside one (see droid_list_workspaces).'),
  prompt,
  replyTo: conversation
    .nullable()
    .describe(
      'Required. The Amp conversation (T- followed by a lowercase UUID) this session reports to through reply-back, or null for detached work. Never defaulted.',
    ),
  model: model.optional(),
  autonomy: autonomySchema.optional().describe('off = read-only Spec mode; low/medium/high allow real actions, up to the host ceiling.'),
  reasoningEffort: reasoningEffort.optional(),
  title: z.string().min(1).max(200).optional(),
  labels: z.array(label).max(MAX_LABELS).optional(),
  outputSchema: outputSchema.optional(),
  budget: budgetInput.session.optional(),
  network: z
    .enum(['model-only', 'host', 'open'])
    .optional()
    .describe(
      'Whom this session\'s turns may connect to. Default "host": the host\'s policy (droid_list_workspaces policy.network). ' +
        '"model-only": only the model endpoints (Factory and the custom models), never the operator\'s allow list: for untrusted input. ' +
        '"open" only where the host\'s own policy is open; asking for more than the host allows is refused network_above_ceiling.',
    ),
  isolation: z
    .enum(['none', 'worktree'])
    .optional()
    .describe(
      'Default "none": the session works in the workspace itself. "worktree": the session gets its own checkout of the ' +
        "workspace's git repository, made from its current HEAD on a new branch droid/<session> when the first turn starts; " +
        'its turns run and commit there, so several writer sessions of one repository run at once. Needs the host to offer it ' +
        '(config worktrees), a workspace inside a git work tree, and autonomy above off. Nothing is ever merged for you.',
    ),
  forkFrom: z
    .strictObject({
      session: sessionHandle,
      run: runHandle.optional().describe("The source's run to fork right after; omit for its latest."),
    })
    .optional()
    .describe(
      "Fork an existing session: the new session's conversation is the source's, up to its latest turn or right after `run`; " +
        "the source is untouched, and the fork has its own handle, title, labels and budget. workspace must be the source's. " +
        'With isolation "worktree" the fork gets its own checkout, made from the source\'s branch (or the workspace\'s HEAD), so ' +
        'several forks can try different approaches at once (its checkout is made from that branch as it is when the fork starts). ' +
        "The fork's first turn waits behind a turn its source is running. Refused for a source with an unknown outcome, and a run " +
        'not of the source, unfinished, or no longer in its conversation.',
    ),
});

export const sendInput = z.strictObject({
  requestKey,
  session: sessionHandle,
  prompt,
  interrupt: z.boolean().optional().describe('true: interrupt the running turn and run this next (steering). Default false: queue after it.'),
  replyTo: conversation
    .nullable()
    .optional()
    .describe(
      "Omit to keep the session's route. A conversation id retargets reply-back to it and null detaches; either starts a new route, which invalidates every older reply handle (even if this turn is later cancelled).",
    ),
  model: model.optional(),
  autonomy: autonomySchema.optional(),
  reasoningEffort: reasoningEffort.optional(),
  outputSchema: outputSchema.optional(),
  budget: budgetInput.turn.optional(),
  rewindTo: runHandle
    .optional()
    .describe(
      'A finished run of this session: before the prompt, the session is rewound to its state before that run began: the conversation, ' +
        "and the files droid's own file tools changed since (files they created are deleted, files they edited put back; shell commands' " +
        'changes are not undone). The undone runs stay in history with rewoundBy set; this run records what was restored. ' +
        'Refused (rewind_conflict, nothing changed) when a file droid would put back was changed since those turns ended.',
    ),
  compact: z
    .boolean()
    .optional()
    .describe('true: droid compacts the conversation (replaces it by its summary) before the prompt. latestRun.compaction shows the context before and after.'),
});

export const sessionInput = z.strictObject({ session: sessionHandle });

export const waitInput = z.strictObject({
  sessions: z.array(sessionHandle).min(1).max(10).describe('1 to 10 distinct session handles.'),
  timeoutSeconds: z.number().int().min(0).max(60).optional().describe('How long to wait, 0 to 60 seconds (default 30). A timeout is not a failure.'),
});

export const emptyInput = z.strictObject({});

const cursor = z.string().min(1).max(1_000).describe('nextCursor from the previous page; omit for the first page.');
const pageLimit = z.number().int().min(1).max(100).optional().describe('Items per page, 1 to 100 (default 25).');
const isoDate = z.string().min(1).max(64);

export const readInput = z.strictObject({ session: sessionHandle, cursor: cursor.optional(), limit: pageLimit });

export const findInput = z.strictObject({
  query: z.string().min(1).max(500).optional().describe('Case-insensitive text over title, labels and output preview (never prompts).'),
  state: z.enum(['working', 'idle', 'unknown']).optional(),
  workspace: z.string().min(1).max(4096).optional().describe('That directory and its descendants.'),
  labels: z.array(label).min(1).max(MAX_LABELS).optional().describe('Sessions carrying all of these labels.'),
  after: isoDate.optional().describe('Created at or after this ISO date-time (inclusive).'),
  before: isoDate.optional().describe('Created before this ISO date-time (exclusive).'),
  archived: z.boolean().optional().describe('Archived sessions are hidden unless true, which selects archived ones only.'),
  hasChanges: z
    .boolean()
    .optional()
    .describe('true: sessions where some turn recorded changed files; false: sessions where none did (unknown counts as none).'),
  ...spendFilters,
  cursor: cursor.optional(),
  limit: pageLimit,
});

export const updateInput = z.strictObject({
  session: sessionHandle,
  title: z.string().min(1).max(200).nullable().optional().describe('New title, or null to clear it.'),
  labels: z
    .strictObject({ add: z.array(label).max(MAX_LABELS).optional(), remove: z.array(label).max(MAX_LABELS).optional() })
    .optional()
    .describe(`Labels to add and remove (lowercase; at most ${MAX_LABELS} per session).`),
  archived: z.boolean().optional(),
});

export const usageInput = z.strictObject({
  session: sessionHandle.optional(),
  after: isoDate.optional().describe('Turns accepted at or after this ISO date-time.'),
  before: isoDate.optional().describe('Turns accepted before this ISO date-time.'),
  groupBy: z.enum(['model']).optional().describe('"model": also split the total by the model each turn ran on (byModel).'),
});
