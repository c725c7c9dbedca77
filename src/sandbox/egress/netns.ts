/**
 * How a sandboxed droid in its own network namespace reaches its proxy.
 *
 * The namespace has only a loopback. Its one way out is a listening TCP
 * socket on that loopback (PROXY_PORT) whose accepting end is outside: a
 * small Node program (netns-listener.cts), started by the sandbox's shell
 * before it execs droid, opens the listener inside the namespace and passes
 * it over Node's IPC channel (SCM_RIGHTS) to the process that spawned bwrap,
 * then exits. That process runs the proxy (proxy.ts) on it, in the host's
 * namespace. Nothing inside ever creates a Unix socket (the seccomp filter
 * refuses them), nothing stays running inside but droid, and the channel's
 * descriptor is closed before droid starts.
 *
 * Chosen over (measured, docs/THREAT-MODEL.md): a relay inside the sandbox
 * (socat and the like) would need Unix sockets after the filter or a second
 * bubblewrap; pasta/slirp4netns give the namespace a full userspace network
 * stack (more surface, a Debian package more) that still needs a proxy.
 */

import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * This server's own listener helper and Node, for the controller to put in
 * the spec (a bundled worker's module URL names the bundle). From the
 * sources (tests), the built copy: tsc compiles the helper to .cjs.
 */
export function egressLaunchOfThisServer(): EgressLaunch {
  const compiled = import.meta.url.endsWith('.ts') ? '../../../dist/src/sandbox/egress/netns-listener.cjs' : './netns-listener.cjs';
  return { nodePath: realpathSync(process.execPath), helperPath: fileURLToPath(new URL(compiled, import.meta.url)) };
}

/** The proxy's address inside every namespace (private to it: no other process listens there). */
const PROXY_PORT = 3128;
const PROXY_URL = `http://127.0.0.1:${PROXY_PORT}`;

/** What every program inside reads to find the proxy; both spellings, as tools differ. */
export const PROXY_ENV: Readonly<Record<string, string>> = {
  HTTP_PROXY: PROXY_URL,
  HTTPS_PROXY: PROXY_URL,
  ALL_PROXY: PROXY_URL,
  http_proxy: PROXY_URL,
  https_proxy: PROXY_URL,
  all_proxy: PROXY_URL,
};

/** The Node program that opens the listener, and the Node that runs it (the server's own). */
export interface EgressLaunch {
  nodePath: string;
  helperPath: string;
}

/** The stdio slot of the IPC channel the listener comes back on (fd 3 carries the seccomp program). */
const LISTENER_CHANNEL_FD = 4;

/**
 * The shell line bwrap runs instead of droid: the listener helper in the
 * background, on the channel and nothing else (no stdio of droid's, a clean
 * environment), then droid itself without the channel. The helper runs at
 * niceness 19: its ≈ 55 ms of Node start-up then takes no CPU from droid's
 * own start on a busy host (bench/egress.ts: +47 ms without, +13 and -72 ms
 * with, medians of 10-14 turn starts on 2 cores); droid's first request waits
 * for the listener (run-turn.ts). Pure.
 */
export function unsharedNetCommand(egress: EgressLaunch): string[] {
  const fd = LISTENER_CHANNEL_FD;
  const script =
    `node=$1; helper=$2; shift 2; ` +
    `/usr/bin/env -i NODE_CHANNEL_FD=${fd} nice -n 19 "$node" "$helper" ${PROXY_PORT} </dev/null >/dev/null ${fd}<&${fd} & ` +
    `unset NODE_CHANNEL_FD NODE_CHANNEL_SERIALIZATION_MODE; exec ${fd}>&-; exec "$@"`;
  return ['/bin/sh', '-c', script, 'droid-mcp-netns', egress.nodePath, egress.helperPath];
}
