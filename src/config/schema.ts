import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { AUTONOMY_LEVELS, type Autonomy } from '../droid/permission-policy.js';
import type { HostCeilings } from '../shared/budget.js';
import { parseAllowEntry } from '../shared/egress-policy.js';

export const REASONING_EFFORTS = ['off', 'none', 'dynamic', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

export const TRANSPORTS = ['stdio', 'http'] as const;

const SANDBOX_MODES = ['bwrap', 'off'] as const;
export const NETWORK_MODES = ['proxy', 'open'] as const;
export type Transport = (typeof TRANSPORTS)[number];

/**
 * The only reply-back endpoint Amp accepts. It is generic on purpose: a
 * thread-bound URL broke every launch once its thread was archived.
 */
export const AMP_MCP_URL = 'https://ampcode.com/mcp?profile=puck';

export const CONFIG_DEFAULTS = {
  transport: 'stdio',
  maxAutonomy: 'high',
  maxConcurrentRuns: 4,
  warmPoolSize: 1,
  runTimeoutMs: 3_600_000,
  cancelGraceMs: 5_000,
  modelCacheTtlMs: 60_000,
  port: 8787,
} as const;

/** Node timers fire at once above 2^31-1 ms, so longer values would be silently wrong. */
const MAX_TIMER_MS = 2_147_483_647;

export function autonomyAtMost(a: Autonomy, ceiling: Autonomy): boolean {
  return AUTONOMY_LEVELS.indexOf(a) <= AUTONOMY_LEVELS.indexOf(ceiling);
}

/**
 * Name-based guess that a model id or display name is a Fast variant
 * (`gpt-5-fast`, `Claude Opus 4.5 (Fast Mode)`). Factory gives no catalog
 * flag for this, so a whole-word/segment match is the best available signal;
 * it must not fire on words that merely contain "fast" (`breakfast`, `fastest`).
 */
export function looksFast(text: string): boolean {
  return /(?:^|[^a-z0-9])fast(?:mode)?(?=[^a-z0-9]|$)/i.test(text);
}

/** Reply-back, resolved: `{}` in the file means the generic endpoint. */
export interface AmpMcpConfig {
  /** AMP_MCP_URL, or a loopback relay (`isLoopbackRelayUrl`). */
  readonly url: string;
}

/**
 * A local relay in front of Amp (the tests use one): plain http on
 * 127.0.0.1 or [::1] with an explicit port, no credentials, no fragment.
 * Loopback only, so the endpoint can never be some other remote host.
 */
function isLoopbackRelayUrl(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return (
    url.protocol === 'http:' &&
    (url.hostname === '127.0.0.1' || url.hostname === '[::1]') &&
    url.port !== '' &&
    url.username === '' &&
    url.password === '' &&
    url.hash === '' &&
    !value.includes('#')
  );
}

/** A reply-back URL names no thread: recipients are per session. */
function namesThread(value: string): boolean {
  return /thread/i.test(value);
}

/** The controller configuration after validation, defaults and path resolution. */
export interface Config {
  /** Canonical (realpath'd), existing, de-duplicated directories. */
  readonly approvedDirectories: readonly string[];
  /** Normalized absolute path; it may not exist yet (the store creates it privately). */
  readonly stateDirectory: string;
  /** Absolute path of an executable `droid`, explicit or discovered. */
  readonly droidPath: string;
  readonly transport: Transport;
  readonly maxAutonomy: Autonomy;
  readonly defaultAutonomy: Autonomy;
  readonly defaultModel?: string;
  readonly reasoningEffort?: ReasoningEffort;
  readonly excludeModelIds: readonly string[];
  readonly maxConcurrentRuns: number;
  /**
   * Pre-forked workers kept ready for the next turn (0: none), at most
   * maxConcurrentRuns. Each holds a pre-spawned droid only when the sandbox
   * is off; under bubblewrap only the Node worker is warm.
   */
  readonly warmPoolSize: number;
  readonly runTimeoutMs: number;
  readonly cancelGraceMs: number;
  /** Spend ceilings callers' budgets may not exceed (maxTurnTokens, maxTurnCredits, maxSessionCredits); null: none. */
  readonly ceilings: HostCeilings;
  /** Compact a session's conversation before a turn once its last context occupancy reached this fraction (issue 40); absent: never by itself. */
  readonly autoCompactAt?: number;
  readonly modelCacheTtlMs: number;
  readonly port: number;
  readonly tokenFile?: string;
  readonly publicUrl?: string;
  /** Absent means reply-back is disabled. */
  readonly ampMcp?: AmpMcpConfig;
  /** Absent: sessions may not ask for `isolation: "worktree"` (config/worktrees.ts checks the directory). */
  readonly worktrees?: WorktreesConfig;
  /**
   * How turns are confined. `bwrap` (the Linux default) with the path found,
   * or null when no bubblewrap was found (turns then fail sandbox_unavailable);
   * `off` only when the operator said so.
   */
  readonly sandbox: { readonly mode: 'bwrap'; readonly bwrapPath: string | null } | { readonly mode: 'off' };
  /**
   * Where sandboxed droids may connect (issue 37). `proxy` (the default): only
   * through the turn's proxy, to the model endpoints and `allow`; `open`: the
   * host's network. Without a sandbox there is no confinement of either.
   */
  readonly network: { readonly mode: (typeof NETWORK_MODES)[number]; readonly allow: readonly string[] };
  /** Paths in the covered folders (homes, approved roots, /var/lib…) a sandboxed turn may read besides git's identity. */
  readonly sandboxReadable: readonly string[];
}

/** Per-session checkouts (issue 21): where they are made, and how many may exist at once. */
export interface WorktreesConfig {
  /** Canonical, private, inside an approved root. */
  readonly directory: string;
  readonly maxCheckouts: number;
}

// Messages below are appended to the quoted key name by the loader, so they
// read as "<key> must be ...", and each says how to fix it.

function describe(input: unknown): string {
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'an array';
  if (typeof input === 'string') return JSON.stringify(input.length > 80 ? `${input.slice(0, 80)}…` : input);
  return typeof input === 'number' || typeof input === 'boolean' ? String(input) : `a ${typeof input}`;
}

function typeError(expected: string): (issue: { input?: unknown }) => string {
  return (issue) => {
    if (issue.input === undefined) return `is required: set it to ${expected}`;
    if (issue.input === null) return `must be ${expected}, not null (omit optional keys to leave them unset)`;
    return `must be ${expected}; got ${describe(issue.input)}`;
  };
}

function absolutePath(what: string) {
  const expected = `the absolute path of ${what}`;
  return z
    .string({ error: typeError(expected) })
    .refine((p) => !p.includes('\0'), { error: 'must not contain a NUL character', abort: true })
    .refine((p) => isAbsolute(p), {
      error: (issue) => `must be an absolute path (JSON does not expand "~" or resolve relative paths); got ${describe(issue.input)}. Set ${expected}`,
    });
}

function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  const list = values.map((v) => `"${v}"`).join(', ');
  return z.enum(values, { error: (issue) => `must be one of ${list}; got ${describe(issue.input)}` });
}

function intRange(min: number, max: number) {
  const expected = `an integer from ${min} to ${max}`;
  return z
    .int({ error: typeError(expected) })
    .min(min, { error: `must be ${expected}` })
    .max(max, { error: `must be ${expected}` });
}

function positiveNumber() {
  const expected = 'a number above 0';
  return z
    .number({ error: typeError(expected) })
    .positive({ error: `must be ${expected}` })
    .finite({ error: `must be ${expected}` });
}

/** A share of the context window, such as 0.8. */
function contextFraction() {
  const expected = 'a fraction of the context window above 0 and at most 1, such as 0.8';
  return z
    .number({ error: typeError(expected) })
    .gt(0, { error: `must be ${expected}` })
    .lte(1, { error: `must be ${expected}` });
}

const modelId = z.string({ error: typeError('a model id string') }).refine((v) => v.length > 0 && v.trim() === v, {
  error: 'must be a non-empty model id without surrounding spaces (use an id from droid_models)',
});

function isPublicUrl(value: string): boolean {
  try {
    const url = new URL(value);
    // Credentials in the URL would leak into logs and tool output.
    return url.protocol === 'https:' && url.username === '' && url.password === '' && value.endsWith('/mcp');
  } catch {
    return false;
  }
}

const ampMcpSchema = z.strictObject(
  {
    url: z
      .string({ error: typeError(`exactly "${AMP_MCP_URL}" or a loopback relay URL`) })
      .refine((u) => !namesThread(u) && (u === AMP_MCP_URL || isLoopbackRelayUrl(u)), {
        error: (issue) =>
          namesThread(String(issue.input))
            ? `must not name a thread: recipients are per session (replyTo), and a thread-bound endpoint breaks every launch once its thread is archived. Use exactly "${AMP_MCP_URL}" or omit url`
            : `must equal exactly "${AMP_MCP_URL}" (the only profile Amp accepts; no aliases) or be a local relay on loopback (http://127.0.0.1:PORT/… or http://[::1]:PORT/…); got ${describe(issue.input)}. Use one of those or omit url`,
      })
      .optional(),
  },
  { error: typeError('an object: {} to enable reply-back with the generic Amp endpoint, or omit the key') },
);

const worktreesSchema = z.strictObject(
  {
    directory: absolutePath('a private directory inside an approved root where session checkouts are made'),
    maxCheckouts: intRange(1, 256).default(16),
  },
  { error: typeError('an object {"directory": "/abs/path"} to let sessions ask for isolation: "worktree", or omit the key') },
);

const allowEntry = z.string({ error: typeError('a host string such as "registry.npmjs.org", "*.github.com" or "127.0.0.1:4873"') }).check((ctx) => {
  const parsed = parseAllowEntry(ctx.value);
  if (typeof parsed === 'string') ctx.issues.push({ code: 'custom', message: `has an entry that ${parsed}`, input: ctx.value });
});

const networkSchema = z.strictObject(
  {
    mode: oneOf(NETWORK_MODES).default('proxy'),
    allow: z
      .array(allowEntry, { error: typeError('an array of host strings') })
      .max(256, { error: 'must list at most 256 hosts' })
      .default([]),
  },
  { error: typeError('an object {"mode": "proxy" | "open", "allow": [hosts]}, or omit the key (proxy, model endpoints only)') },
);

/**
 * Shape of the JSON config file. Syntax and single-key rules only; checks
 * that need the filesystem or several keys live in the loader.
 */
export const configFileSchema = z.strictObject(
  {
    approvedDirectories: z
      .array(absolutePath('an existing project root directory'), {
        error: typeError('a non-empty array of absolute project root directory paths'),
      })
      .min(1, { error: 'must list at least one approved project root (absolute path of an existing directory)' }),
    stateDirectory: absolutePath('the private (chmod 700) controller state directory'),
    droidPath: absolutePath('the droid CLI executable').optional(),
    transport: oneOf(TRANSPORTS).default(CONFIG_DEFAULTS.transport),
    maxAutonomy: oneOf(AUTONOMY_LEVELS).default(CONFIG_DEFAULTS.maxAutonomy),
    defaultAutonomy: oneOf(AUTONOMY_LEVELS).optional(),
    defaultModel: modelId
      .refine((v) => !looksFast(v), {
        error: (issue) =>
          `looks like a Fast variant (${describe(issue.input)}); the host default must be a standard model such as "claude-opus-5-5" (callers can still pick a Fast model explicitly per session)`,
      })
      .optional(),
    reasoningEffort: oneOf(REASONING_EFFORTS).optional(),
    excludeModelIds: z.array(modelId, { error: typeError('an array of model id strings') }).default([]),
    maxConcurrentRuns: intRange(1, 16).default(CONFIG_DEFAULTS.maxConcurrentRuns),
    warmPoolSize: intRange(0, 16).optional(),
    runTimeoutMs: intRange(1000, MAX_TIMER_MS).default(CONFIG_DEFAULTS.runTimeoutMs),
    cancelGraceMs: intRange(100, MAX_TIMER_MS).default(CONFIG_DEFAULTS.cancelGraceMs),
    // Spend ceilings; absent: none. A caller's budget above one is refused, never lowered.
    maxTurnTokens: intRange(1, Number.MAX_SAFE_INTEGER).optional(),
    maxTurnCredits: positiveNumber().optional(),
    maxSessionCredits: positiveNumber().optional(),
    autoCompactAt: contextFraction().optional(),
    modelCacheTtlMs: intRange(5000, 600_000).default(CONFIG_DEFAULTS.modelCacheTtlMs),
    port: intRange(1, 65535).default(CONFIG_DEFAULTS.port),
    tokenFile: absolutePath('the private bearer token file').optional(),
    publicUrl: z
      .string({ error: typeError('an https:// URL ending in /mcp') })
      .refine(isPublicUrl, {
        error: (issue) => `must be an https:// URL without credentials ending in "/mcp" (the approved HTTPS proxy route); got ${describe(issue.input)}`,
      })
      .optional(),
    ampMcp: ampMcpSchema.optional(),
    sandbox: oneOf(SANDBOX_MODES).optional(),
    bwrapPath: absolutePath('the bubblewrap (bwrap) executable').optional(),
    worktrees: worktreesSchema.optional(),
    network: networkSchema.optional(),
    sandboxReadable: z
      .array(absolutePath('a file or folder a sandboxed turn may read'), { error: typeError('an array of absolute paths') })
      .max(64, { error: 'must list at most 64 paths' })
      .optional(),
  },
  { error: typeError('a JSON object of settings') },
);

export type ConfigFile = z.output<typeof configFileSchema>;

/** Allowed keys per object path, for "unknown key" messages. */
export const CONFIG_KEYS: Readonly<Record<string, readonly string[]>> = {
  '': Object.keys(configFileSchema.shape),
  ampMcp: Object.keys(ampMcpSchema.shape),
  worktrees: Object.keys(worktreesSchema.shape),
  network: Object.keys(networkSchema.shape),
};

/** Keys that once existed or are commonly guessed, with why they are refused. */
export const REMOVED_KEYS: Readonly<Record<string, string>> = {
  puck: 'is no longer supported: reply-back recipients are per session (replyTo) and never defaulted, because a host default recipient silently misrouted omitted replyTo. Remove "puck"; to enable reply-back set "ampMcp": {}',
  'ampMcp.threadID':
    'is not allowed: ampMcp names no thread; recipients are per session (replyTo), and a thread-bound endpoint breaks every launch once its thread is archived. Remove it',
  'ampMcp.conversationId': 'is not allowed: ampMcp names no recipient; each routed session passes its own replyTo, never a host default. Remove it',
};
