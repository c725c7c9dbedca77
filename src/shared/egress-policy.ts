/**
 * Where a sandboxed droid may connect through its turn's proxy (sandbox/egress/proxy.ts).
 * Pure: entries in, a decision out.
 *
 * A destination is allowed when an entry names its host and port:
 * - Factory's API hosts (measured: every request of a BYOK turn went to
 *   these two, through the proxy, docs/THREAT-MODEL.md);
 * - each custom model's `baseUrl` host and port (droid's settings);
 * - a routed turn's Amp MCP endpoint;
 * - the operator's `network.allow` (unless the session asked for model-only).
 *
 * An entry without a port allows 443 and 80. `*.example.com` allows every
 * name below example.com (not example.com itself, and no IP address). An
 * address in the host's loopback, link-local, private or otherwise internal
 * ranges is reached only through an entry that names its host exactly, with
 * a port: a wildcard or a port-less name that resolves there (DNS rebinding)
 * is refused. Factory's, the models' and the Amp entries carry their ports,
 * so they may resolve anywhere: the operator chose those endpoints.
 */
import { BlockList, isIP } from 'node:net';

export type EntrySource = 'factory' | 'model' | 'reply-back' | 'config';

export interface AllowEntry {
  /** Lower-case host name or IP literal (IPv6 without brackets), or `*.` and a domain. */
  host: string;
  /** null: 443 and 80. */
  port: number | null;
  source: EntrySource;
}

/** droid's own endpoints (measured on 0.225.2: several CONNECTs to the first, one to the second per turn). */
const FACTORY_HOSTS: readonly string[] = ['api.factory.ai', 'telemetry.factory.ai'];

const DEFAULT_PORTS = [443, 80];
const HOST_LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** A host name or IP literal, lower-cased and unbracketed; null when it is neither. */
export function normalHost(raw: string): string | null {
  let host = raw.trim().toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (isIP(host)) return host;
  if (host.length === 0 || host.length > 253) return null;
  return host.split('.').every((label) => HOST_LABEL.test(label)) ? host : null;
}

/**
 * One `network.allow` entry: `host`, `host:port`, `*.domain`, `*.domain:port`,
 * `[v6]:port`. Returns the entry, or why it is refused (the config loader shows it).
 */
export function parseAllowEntry(text: string): AllowEntry | string {
  const hint = 'write a host name, "*.domain", an IP address, optionally ":port" (e.g. "registry.npmjs.org", "*.github.com", "127.0.0.1:4873", "[::1]:8080")';
  if (text.includes('/') || text.includes('@')) return `${JSON.stringify(text)} is not a host: ${hint}; no scheme, path or credentials`;
  let hostPart = text.trim();
  let port: number | null = null;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(hostPart);
  if (bracketed) {
    hostPart = bracketed[1]!;
    if (bracketed[2] !== undefined) port = Number(bracketed[2]);
  } else if (hostPart.split(':').length === 2) {
    const [h, p] = hostPart.split(':') as [string, string];
    if (!/^\d+$/.test(p)) return `${JSON.stringify(text)} has no valid port: ${hint}`;
    hostPart = h;
    port = Number(p);
  }
  if (port !== null && (port < 1 || port > 65535)) return `${JSON.stringify(text)} has a port outside 1-65535`;
  const wildcard = hostPart.startsWith('*.');
  const host = normalHost(wildcard ? hostPart.slice(2) : hostPart);
  if (!host || (wildcard && isIP(host))) return `${JSON.stringify(text)} is not a host: ${hint}`;
  if (!wildcard && !host.includes('.') && !isIP(host) && host !== 'localhost') return `${JSON.stringify(text)} is a bare name; ${hint}`;
  return { host: wildcard ? `*.${host}` : host, port, source: 'config' };
}

/** The host and port of a URL as an entry (a model's baseUrl, the Amp endpoint); null when it is not http(s). */
export function entryOfUrl(url: string, source: EntrySource): AllowEntry | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return null;
  const host = normalHost(parsed.hostname);
  if (!host) return null;
  return { host, port: parsed.port ? Number(parsed.port) : parsed.protocol === 'https:' ? 443 : 80, source };
}

/** The custom models' endpoints in droid's settings (`customModels[].baseUrl`; the older `custom_models[].base_url` too). */
export function modelEntries(settings: unknown): AllowEntry[] {
  if (typeof settings !== 'object' || settings === null) return [];
  const record = settings as Record<string, unknown>;
  const out: AllowEntry[] = [];
  for (const [list, key] of [
    ['customModels', 'baseUrl'],
    ['custom_models', 'base_url'],
  ] as const) {
    const models = record[list];
    if (!Array.isArray(models)) continue;
    for (const model of models) {
      const url = typeof model === 'object' && model !== null ? (model as Record<string, unknown>)[key] : undefined;
      const entry = typeof url === 'string' ? entryOfUrl(url, 'model') : null;
      if (entry) out.push(entry);
    }
  }
  return out;
}

export function factoryEntries(): AllowEntry[] {
  return FACTORY_HOSTS.map((host) => ({ host, port: 443, source: 'factory' as const }));
}

function hostMatches(pattern: string, host: string): boolean {
  // A wildcard names DNS names only: `*.0.0.1` is no pattern of addresses.
  return pattern.startsWith('*.') ? isIP(host) === 0 && host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1 : pattern === host;
}

/** The first entry naming this host and port, or null. */
function matchEntry(entries: readonly AllowEntry[], host: string, port: number): AllowEntry | null {
  const name = normalHost(host);
  if (!name) return null;
  return entries.find((e) => hostMatches(e.host, name) && (e.port === null ? DEFAULT_PORTS.includes(port) : e.port === port)) ?? null;
}

/** Whether an entry may lead to an internal address: only one naming its host exactly, with a port. */
function reachesInternal(entry: AllowEntry): boolean {
  return !entry.host.startsWith('*.') && entry.port !== null;
}

/** Ranges that are not the public internet (RFC 6890 and friends); IPv4-mapped IPv6 addresses are judged as the IPv4 they carry (BlockList does). */
const INTERNAL = (() => {
  const list = new BlockList();
  const v4: ReadonlyArray<readonly [string, number]> = [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.0.2.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['198.51.100.0', 24],
    ['203.0.113.0', 24],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ];
  const v6: ReadonlyArray<readonly [string, number]> = [
    ['::', 128],
    ['::1', 128],
    ['::', 96],
    ['64:ff9b::', 96],
    ['fc00::', 7],
    ['fe80::', 10],
    ['fec0::', 10],
    ['ff00::', 8],
    ['2001:db8::', 32],
  ];
  for (const [net, bits] of v4) list.addSubnet(net, bits, 'ipv4');
  for (const [net, bits] of v6) list.addSubnet(net, bits, 'ipv6');
  return list;
})();

/** The address is not on the public internet: loopback, link-local, private, unique-local, unspecified, multicast, documentation, NAT64 and IPv4-compatible forms. */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return INTERNAL.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

export type Decision = { allowed: true; entry: AllowEntry } | { allowed: false; why: string };

/** Whether a destination named by the turn may be asked for at all (before resolving it). */
export function decideName(entries: readonly AllowEntry[], host: string, port: number): Decision {
  const entry = matchEntry(entries, host, port);
  if (entry) return { allowed: true, entry };
  return { allowed: false, why: `${host}:${port} is not on this host's egress allowlist` };
}

/**
 * Which of the resolved addresses the proxy may connect to for `entry`:
 * internal ones only through an exact host-and-port entry. Empty: refused.
 */
export function usableAddresses(entry: AllowEntry, addresses: readonly string[]): string[] {
  return reachesInternal(entry) ? [...addresses] : addresses.filter((a) => !isInternalAddress(a));
}

/** The body of a 403: why, and how an operator allows it. */
export function refusalText(host: string, port: number, why: string): string {
  const shown = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
  return (
    `droid-mcp refused ${shown}: ${why}.\n` +
    'This turn runs without direct network access; it reaches only the hosts the operator allows, through this proxy.\n' +
    `To allow it, an operator adds "${shown}" (or the host name without a port, for 443 and 80) to "network": {"allow": [...]} in droid-mcp's config and restarts the server. ` +
    'Loopback, link-local and private addresses need the exact host and port.\n'
  );
}
