/**
 * The session tools: names, descriptions, schemas, annotations and handlers.
 * Handlers return plain structured objects; the server turns them into MCP
 * results and turns ControllerErrors into `isError` results.
 */
import type { z } from 'zod';
import type { CatalogModel } from '../droid/client.js';
import type { SessionController } from '../controller/controller.js';
import type { LaunchDefaults } from '../controller/acceptance/turn-settings.js';
import { NO_CEILINGS, type HostCeilings } from '../shared/budget.js';
import { MAX_LABELS } from '../controller/sessions/metadata.js';
import * as input from './tool-inputs.js';
import * as output from './tool-outputs.js';
import { waitWithProgress, type ProgressSink } from './progress.js';

export interface ToolContext {
  controller: SessionController;
  models(): Promise<CatalogModel[]>;
  approvedRoots: readonly string[];
  policy: LaunchDefaults;
  runTimeoutMs: number;
  replyBack: boolean;
  /** Whether sessions may ask for their own checkout (config `worktrees`). */
  worktrees: boolean;
  /** The droid CLI's version, or null when `droid --version` could not be read. */
  droidVersion(): Promise<string | null>;
  sandbox: SandboxStatus;
  /** Where turns may connect (issue 37), as of now: droid's settings are read per call. */
  network(): NetworkStatus;
  /** The operator's spend ceilings; absent: none. */
  ceilings?: HostCeilings;
}

/** The sandbox mode and whether its start-up trial run worked. */
export interface SandboxStatus {
  mode: 'bwrap' | 'off';
  available: boolean;
  detail: string | null;
}

/**
 * `proxy`: turns reach only `alwaysAllowed` and `allow`, through their proxy
 * (a session with network "model-only" only the former); `open`: the host's
 * network; `unconfined`: no sandbox at all.
 */
export interface NetworkStatus {
  mode: 'proxy' | 'open' | 'unconfined';
  allow: string[];
  alwaysAllowed: string[];
}

/** Per call: aborted when the client cancels its request (or the transport closes). */
export interface ToolCall {
  signal?: AbortSignal;
  /** Present when the request carried a progress token. */
  progress?: ProgressSink;
}

export interface ToolDefinition<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  readOnly: boolean;
  handler(args: z.infer<I>, ctx: ToolContext, call: ToolCall): Promise<z.infer<O>> | z.infer<O>;
}

function tool<I extends z.ZodType, O extends z.ZodType>(def: ToolDefinition<I, O>): ToolDefinition {
  return def as unknown as ToolDefinition;
}

export const TOOLS: readonly ToolDefinition[] = [
  tool({
    name: 'droid_create_session',
    title: 'Create a droid session',
    description:
      'Start a new droid session in an approved workspace and submit its first turn. The turn runs in the background: ' +
      'keep metadata.session and poll it with droid_wait_for_sessions. requestKey makes the call idempotent; replyTo is ' +
      'required: null for detached work, or the Amp conversation (T-<uuid>) the session reports to when the host offers ' +
      'reply-back (droid_list_workspaces policy.replyBack). A routed turn may message only that conversation, through ' +
      "Amp's puck tool; notification in the status says what it did. Omitted model, autonomy and reasoningEffort use the " +
      'host launch defaults. admission says whether the turn started at once or is queued, and behind what. ' +
      'outputSchema (optional JSON Schema, object root, ≤ 32 KiB) asks for a structured answer for this turn; a schema ' +
      'droid or our validator rejects is invalid_arguments and nothing is accepted. budget {maxTokens?, maxCredits?} caps ' +
      "the session's total spend across its turns; the cap is checked whenever droid reports usage, so a turn can overshoot " +
      'by one model step, and a turn that reaches it is interrupted (budget_exceeded). isolation:"worktree" (when the host ' +
      'offers it) gives a writer session its own checkout of the repository on branch droid/<session>, so writer sessions of ' +
      'one repository run side by side; merging is left to you (or to a droid turn you ask). forkFrom {session, run?} ' +
      "forks a session: the new one starts from the source's conversation (its latest turn, or right after run), in the " +
      'source\'s workspace (pass it as workspace), with its own handle, title, labels and budget; add isolation:"worktree" ' +
      'so several forks try different approaches at once. A fork waits behind a turn its source is running.\n' +
      'Example: {"requestKey":"review-42","workspace":"/srv/repos/app","prompt":"Review the diff and report findings.","autonomy":"off","replyTo":null,"title":"Diff review"}',
    input: input.createInput,
    output: output.acceptanceOutput,
    readOnly: false,
    handler: (args, { controller }) => controller.create(args),
  }),
  tool({
    name: 'droid_send_message',
    title: 'Send a follow-up or steer',
    description:
      'Send a follow-up message to an existing session. When the session is idle it starts at once; when busy it is ' +
      'queued after the current turn (default interrupt:false). interrupt:true steers: older queued turns are superseded, ' +
      'the running turn is interrupted, and this message runs next in the same droid session. Settings default to the ' +
      "session's last accepted ones. replyTo: omit to keep the session's reply route, a conversation id to retarget, " +
      'null to detach; a retarget or detach invalidates every older reply handle from the moment it is accepted. ' +
      'admission says what happened: started, queued (waitingFor: behind what) or interrupting. ' +
      'outputSchema applies to this turn only (give it again on each turn that needs it). budget {maxTokens?, maxCredits?} ' +
      "caps this turn instead of what is left of the session's budget, in both dimensions; the cap is checked whenever droid " +
      'reports usage, so a turn can overshoot by one model step. A session whose budget is spent refuses a message without ' +
      "its own budget (budget_exhausted); one that reached the host's maxSessionCredits refuses every message (start a new session). " +
      "rewindTo: <run> first puts the session back to its state before that run began (the conversation, and the files droid's " +
      'file tools changed since), marks the undone runs rewoundBy, then runs the prompt; compact:true first compacts the conversation ' +
      '(latestRun.compaction shows the context before and after).\n' +
      'Example: {"requestKey":"review-42-fix","session":"5b3c…","prompt":"Now fix the first finding.","interrupt":false}',
    input: input.sendInput,
    output: output.acceptanceOutput,
    readOnly: false,
    handler: (args, { controller }) => controller.send(args),
  }),
  tool({
    name: 'droid_get_session_status',
    title: 'Session status',
    description:
      "Return a session's agentState (working, idle or unknown), needsAttention, notification (what the latest turn did " +
      'about reporting back), a short output preview and its latest ' +
      'run: state, effective settings, error, usage (so far while it runs: final:false; the ceiling it runs under in limit), declined permissions, declined questions and recent progress, plus ' +
      'evidence: structuredOutput (the object the turn returned, valid against its outputSchema by our own check: it proves ' +
      'the shape, not that the content is true), changes (paths added, modified, deleted and renamed in the workspace, from ' +
      'git state before and after the turn: proves what changed on disk, not who changed it, and null means unknown, not ' +
      'none; ignored files and paths outside the workspace are not listed, outsideWorkspace:true flags tool calls that named ' +
      "such paths) and context {used, limit, fraction} (droid's estimate after the turn; above 0.8 start a fresh session). " +
      'A session created with isolation:"worktree" also shows checkout {isolation, path, branch, base, repository, state}, and its ' +
      "writer turns commits (the branch's commits ahead of the base). " +
      'Reading status never starts droid.\n' +
      'Example: {"session":"5b3c2f8e-1d2a-4c1b-9a57-0f4b7c0e9d21"}',
    input: input.sessionInput,
    output: output.statusOutput,
    readOnly: true,
    handler: (args, { controller }) => ({ status: controller.status(args.session) }),
  }),
  tool({
    name: 'droid_wait_for_sessions',
    title: 'Wait for sessions',
    description:
      'Wait until every listed session (1 to 10 distinct handles) has settled, that is no longer working, or until ' +
      'timeoutSeconds (0 to 60, default 30) pass. Returns the status of each; timedOut:true is not a failure, call again. ' +
      'Settled includes idle, needsAttention and unknown. With a progress token, notifications/progress reports sessions ' +
      'as they settle and every few seconds (what is still working, latest progress text, usage so far).\n' +
      'Example: {"sessions":["5b3c2f8e-1d2a-4c1b-9a57-0f4b7c0e9d21"],"timeoutSeconds":60}',
    input: input.waitInput,
    output: output.waitOutput,
    readOnly: true,
    handler: (args, { controller }, { signal, progress }) =>
      progress
        ? waitWithProgress(controller, args.sessions, args.timeoutSeconds ?? 30, signal, progress)
        : controller.waitForSessions(args.sessions, args.timeoutSeconds ?? 30, signal),
  }),
  tool({
    name: 'droid_read_session',
    title: 'Read session history',
    description:
      "Page through a session's history: assistant text, tool calls with their results, each turn's structured output, " +
      'changed files and (checkout sessions) branch commits (own items; the page also names the checkout), and controller notices ' +
      '(interruptions, declined permissions and questions, failures). User prompts are never returned. Follow nextCursor ' +
      'until it is null. historyAvailable:false means some turn has no retained transcript. Reading never starts droid.\n' +
      'Example: {"session":"5b3c2f8e-1d2a-4c1b-9a57-0f4b7c0e9d21","limit":50}',
    input: input.readInput,
    output: output.readOutput,
    readOnly: true,
    handler: (args, { controller }) => controller.read(args.session, args.cursor, args.limit),
  }),
  tool({
    name: 'droid_find_sessions',
    title: 'Find sessions',
    description:
      'Find sessions by text (title, labels and output preview; never prompts) and filters: state, workspace (and its ' +
      'subdirectories), labels (all required), creation time range, archived, hasChanges (some turn recorded changed ' +
      'files), spend (tokensAbove, creditsAbove). Newest created first; pass nextCursor with ' +
      'the same filters for the next page (new sessions never shift later pages).\n' +
      'Example: {"query":"review","state":"idle","labels":["backend"],"after":"2026-11-01T00:00:00Z","limit":10}',
    input: input.findInput,
    output: output.findOutput,
    readOnly: true,
    handler: (args, { controller }) => {
      const { cursor, limit, ...filters } = args;
      return controller.find(filters, cursor, limit);
    },
  }),
  tool({
    name: 'droid_update_session',
    title: 'Update session metadata',
    description:
      `Change a session's title, labels ({add, remove}; lowercase, at most ${MAX_LABELS}) or archived flag. Controller metadata only: ` +
      'it never cancels work or changes routing or settings. A new title is applied in Factory after the next turn. ' +
      'Archiving a session with queued or running turns is rejected; a new message restores an archived session. Archiving a ' +
      'session with its own checkout also removes the checkout folder, only when its branch in the repository holds every commit ' +
      'and nothing is uncommitted or untracked (else checkout_has_unsaved_work, nothing changed); the branch is never deleted.\n' +
      'Example: {"session":"5b3c2f8e-1d2a-4c1b-9a57-0f4b7c0e9d21","title":"Auth refactor","labels":{"add":["backend"]}}',
    input: input.updateInput,
    output: output.statusOutput,
    readOnly: false,
    handler: async (args, { controller }) => {
      const { session, ...update } = args;
      return { status: await controller.update(session, update) };
    },
  }),
  tool({
    name: 'droid_get_usage',
    title: 'Token usage',
    description:
      'Sum token usage over the turns of one session, or over every turn accepted in a date range (after inclusive, before ' +
      'exclusive). Each turn counts once; turnsWithUsage counts turns whose provider reported usage (no report is not ' +
      'zero work). factoryCredits is null when Factory reported none. Running turns count with their usage so far ' +
      '(turnsRunning; final:false until they end). groupBy "model" adds byModel.\n' +
      'Example: {"after":"2026-11-01T00:00:00Z","before":"2026-12-01T00:00:00Z"}',
    input: input.usageInput,
    output: output.usageOutput,
    readOnly: true,
    handler: (args, { controller }) => controller.usage(args),
  }),
  tool({
    name: 'droid_cancel_session',
    title: 'Cancel a session',
    description:
      "Interrupt a session's running turn through droid's protocol and drop its queued turns (state cancelled). " +
      'If droid does not stop within the grace period its process group is killed. Safe to repeat; finished runs are ' +
      'never rewritten, and other sessions are never touched.\n' +
      'Example: {"session":"5b3c2f8e-1d2a-4c1b-9a57-0f4b7c0e9d21"}',
    input: input.sessionInput,
    output: output.statusOutput,
    readOnly: false,
    handler: async (args, { controller }) => ({ status: await controller.cancel(args.session) }),
  }),
  tool({
    name: 'droid_list_workspaces',
    title: 'Approved workspaces and capacity',
    description:
      "List this host's approved workspace roots (canonical absolute paths; pass one, or a directory inside one, as " +
      'workspace), the run capacity {maximum, active, queued, available}, the launch policy (default model, default ' +
      'and maximum autonomy, reasoning effort, and the sandbox: with mode bwrap a writer turn can write only its workspace ' +
      'and a read-only turn nothing, and droid cannot change its own settings for later turns; available:false means ' +
      'every create, send and droid_models call fails with sandbox_unavailable (the catalog is read in the sandbox too); replyBack:true ' +
      'means sessions may be created with a replyTo conversation, worktrees:true that they may ask for isolation:"worktree"; network says whom turns may reach: ' +
      "mode proxy, only alwaysAllowed (Factory and the custom models) and allow, everything else refused and listed in each run's egress) and the version of the droid CLI that runs the turns.\n" +
      'Example: {}',
    input: input.emptyInput,
    output: output.workspacesOutput,
    readOnly: true,
    handler: async (_args, ctx) => ({
      workspaces: [...ctx.approvedRoots],
      capacity: ctx.controller.capacity(),
      policy: {
        defaultModel: ctx.policy.defaultModel,
        defaultAutonomy: ctx.policy.defaultAutonomy,
        maxAutonomy: ctx.policy.maxAutonomy,
        reasoningEffort: ctx.policy.reasoningEffort,
        runTimeoutMs: ctx.runTimeoutMs,
        replyBack: ctx.replyBack,
        worktrees: ctx.worktrees,
        ceilings: ctx.ceilings ?? NO_CEILINGS,
        sandbox: ctx.sandbox,
        network: ctx.network(),
      },
      droid: { version: await ctx.droidVersion() },
    }),
  }),
  tool({
    name: 'droid_models',
    title: 'Live model catalog',
    description:
      "List the models droid offers right now, read from the installed droid CLI's live catalog (cached briefly). " +
      'Disabled, deprecated and operator-excluded models are hidden. Each entry lists its supported reasoning efforts ' +
      'and default; use an id as model on create or send.\n' +
      'Example: {}',
    input: input.emptyInput,
    output: output.modelsOutput,
    readOnly: true,
    handler: async (_args, ctx) => ({
      models: (await ctx.models()).map((m) => ({
        id: m.id,
        displayName: typeof m.displayName === 'string' ? m.displayName : null,
        provider: typeof m.modelProvider === 'string' ? m.modelProvider : null,
        supportedReasoningEfforts: Array.isArray(m.supportedReasoningEfforts) ? m.supportedReasoningEfforts : [],
        defaultReasoningEffort: typeof m.defaultReasoningEffort === 'string' ? m.defaultReasoningEffort : null,
      })),
      defaultModel: ctx.policy.defaultModel,
    }),
  }),
];
