/**
 * The HTTP(S) proxy that is a sandboxed droid's only way out (shared/egress-policy.ts says
 * where to). One per droid process, on the listening socket the network
 * namespace handed out (netns-listener.cts), in the process that started that
 * droid: a turn's worker, or, for a short-lived droid (the catalog read,
 * doctor, verify-route), the process running it. A flood from a turn
 * therefore loads only its own worker, never another turn or the MCP server
 * (a short-lived droid runs no turn's commands), and the proxy ends with it.
 *
 * It speaks the two forms droid and ordinary tools use with HTTP_PROXY:
 * `CONNECT host:port` (a tunnel, for https) and absolute-URI requests
 * (`GET http://host:port/path`, for plain http), the latter forwarded with
 * `Connection: close` both ways, so a client sends one request per
 * connection; whatever follows on it still reaches only the checked
 * destination (as a CONNECT tunnel's bytes do). It resolves names itself (there is no DNS inside) and
 * connects only to the addresses it checked, so a name cannot be re-resolved
 * to somewhere else between the check and the connect.
 */
import { lookup } from 'node:dns/promises';
import { connect, isIP, type Server, type Socket } from 'node:net';
import { PassThrough, type Readable } from 'node:stream';
import { decideName, normalHost, refusalText, usableAddresses, type AllowEntry } from '../../shared/egress-policy.js';

/** The proxy's bounds: each is attack surface a hostile turn could otherwise lean on. */
export const PROXY_LIMITS = {
  /** Client connections open at once; more are closed as they come. */
  maxConnections: 64,
  /** Request line and headers together. */
  maxHeadBytes: 16 * 1024,
  maxRequestLineBytes: 8 * 1024,
  /** From accept to the end of the request's head, however slowly it comes. */
  headTimeoutMs: 10_000,
  /** Reaching the destination. */
  connectTimeoutMs: 10_000,
  /** A tunnel or forwarded request with no byte either way for this long is closed (model streams send far more often). */
  idleTimeoutMs: 300_000,
  /** Distinct refused destinations listed; more are counted in `othersRefused`. */
  maxListedRefusals: 32,
  /** An answered (refused, bad) connection the client does not close is closed after this: it keeps no slot. */
  answeredLingerMs: 5_000,
};

export type ProxyLimits = Readonly<typeof PROXY_LIMITS>;

export interface Refusal {
  host: string;
  port: number;
  count: number;
  /** Epoch ms of the first refusal. */
  firstAt: number;
  why: string;
}

export interface RefusalReport {
  refused: Refusal[];
  /** Refusals of destinations beyond the listed ones. */
  othersRefused: number;
}

export interface EgressProxyOptions {
  entries: readonly AllowEntry[];
  /** The first refusal of each destination (the server logs one line per destination per turn). */
  onRefusal?(refusal: Refusal): void;
  /** Name resolution (tests inject one); default: the host's resolver, every address. */
  resolve?(host: string): Promise<string[]>;
  now?(): number;
  limits?: Partial<ProxyLimits>;
}

export interface EgressProxy {
  refusals(): RefusalReport;
  /** Closes the listener and every connection. */
  close(): void;
}

const defaultResolve = async (host: string) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

type Target = { kind: 'connect'; host: string; port: number } | { kind: 'forward'; host: string; port: number; path: string };

class BadRequest extends Error {}

export function startEgressProxy(server: Server, options: EgressProxyOptions): EgressProxy {
  const limits = { ...PROXY_LIMITS, ...options.limits };
  const now = options.now ?? Date.now;
  const refused = new Map<string, Refusal>();
  let othersRefused = 0;
  const open = new Set<Socket>();
  server.maxConnections = limits.maxConnections;
  const track = (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const ctx: Served = {
    entries: options.entries,
    resolve: options.resolve ?? defaultResolve,
    limits,
    track,
    refuse: (client, host, port, why) => {
      const key = `${host}:${port}`;
      const seen = refused.get(key);
      if (seen) seen.count++;
      else if (refused.size < limits.maxListedRefusals) {
        const refusal = { host, port, count: 1, firstAt: now(), why };
        refused.set(key, refusal);
        options.onRefusal?.(refusal);
      } else othersRefused++;
      answer(limits, client, 403, 'Forbidden', refusalText(host, port, why), { 'X-Droid-Mcp-Refused': key });
    },
  };
  server.on('connection', (client) => {
    track(client);
    readHead(client, limits, (head, rest) => void serve(ctx, client, head, rest).catch(() => client.destroy()));
  });
  server.on('error', () => undefined);
  return {
    refusals: () => ({ refused: [...refused.values()].map((r) => ({ ...r })), othersRefused }),
    close: () => {
      server.close();
      for (const socket of open) socket.destroy();
    },
  };
}

/** What serving one request needs from its proxy. */
interface Served {
  entries: readonly AllowEntry[];
  resolve(host: string): Promise<string[]>;
  limits: ProxyLimits;
  track(socket: Socket): void;
  refuse(client: Socket, host: string, port: number, why: string): void;
}

/** The request's head (bounded in size and time), then `onHead` with it and the bytes after it; the client is paused. */
function readHead(client: Socket, limits: ProxyLimits, onHead: (head: string, rest: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const tooLarge = () =>
    answer(limits, client, 431, 'Request Header Fields Too Large', `droid-mcp's egress proxy takes at most ${limits.maxHeadBytes} bytes of request head\n`);
  // From the first moment, however slowly the bytes come.
  const deadline = setTimeout(() => client.destroy(), limits.headTimeoutMs);
  client.once('close', () => clearTimeout(deadline));
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
    const all = Buffer.concat(chunks);
    const end = all.indexOf('\r\n\r\n');
    if (end === -1) {
      if (size > limits.maxHeadBytes || (all.indexOf('\r\n') === -1 && size > limits.maxRequestLineBytes)) {
        client.off('data', onData);
        tooLarge();
      }
      return;
    }
    client.off('data', onData);
    client.pause();
    if (end > limits.maxHeadBytes) return tooLarge();
    clearTimeout(deadline);
    onHead(all.subarray(0, end).toString('latin1'), all.subarray(end + 4));
  };
  client.on('data', onData);
  // A connection held before the proxy was attached (launch.ts) comes paused.
  client.resume();
}

/** One request: checked, resolved, connected to the address checked, then bytes both ways. */
async function serve(ctx: Served, client: Socket, head: string, rest: Buffer): Promise<void> {
  let target: Target;
  try {
    target = parseTarget(head, ctx.limits.maxRequestLineBytes);
  } catch (err) {
    answer(ctx.limits, client, 400, 'Bad Request', `droid-mcp's egress proxy: ${(err as Error).message}\n`);
    return;
  }
  const decision = decideName(ctx.entries, target.host, target.port);
  if (!decision.allowed) return ctx.refuse(client, target.host, target.port, decision.why);
  let addresses: string[];
  try {
    addresses = isIP(target.host) ? [target.host] : await ctx.resolve(target.host);
  } catch {
    answer(ctx.limits, client, 502, 'Bad Gateway', `droid-mcp's egress proxy could not resolve ${target.host}\n`);
    return;
  }
  const usable = usableAddresses(decision.entry, addresses);
  if (usable.length === 0) {
    return ctx.refuse(
      client,
      target.host,
      target.port,
      `it resolves to an internal address (${addresses.join(', ')}), reachable only through an entry naming that exact host and port`,
    );
  }
  const upstream = await reach(usable, target.port, ctx.limits.connectTimeoutMs);
  if (!upstream) {
    answer(ctx.limits, client, 502, 'Bad Gateway', `droid-mcp's egress proxy could not connect to ${target.host}:${target.port}\n`);
    return;
  }
  if (client.destroyed) {
    upstream.destroy();
    return;
  }
  ctx.track(upstream);
  if (target.kind === 'connect') client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  else upstream.write(forwardedHead(head, target));
  if (rest.length > 0) upstream.write(rest);
  join(client, target.kind === 'connect' ? upstream : closingResponse(upstream, ctx.limits.maxHeadBytes), upstream, ctx.limits.idleTimeoutMs);
}

function parseTarget(head: string, maxLine: number): Target {
  const line = head.slice(0, head.indexOf('\r\n') === -1 ? head.length : head.indexOf('\r\n'));
  if (line.length > maxLine) throw new BadRequest('request line too long');
  const match = /^([A-Z]+) (\S+) HTTP\/1\.[01]$/.exec(line);
  if (!match) throw new BadRequest('not an HTTP/1.x request line');
  const [, method, target] = match as unknown as [string, string, string];
  if (method === 'CONNECT') {
    const hostPort = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(target);
    const host = hostPort ? normalHost(hostPort[1]!) : null;
    const port = hostPort ? Number(hostPort[2]) : 0;
    if (!host || port < 1 || port > 65535) throw new BadRequest(`CONNECT needs host:port, got ${JSON.stringify(target.slice(0, 200))}`);
    return { kind: 'connect', host, port };
  }
  if (!target.startsWith('http://')) {
    throw new BadRequest(
      target.startsWith('https://') ? 'https is tunnelled with CONNECT, not forwarded' : 'this is a proxy: send an absolute http:// URL or CONNECT',
    );
  }
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new BadRequest('the request URL does not parse');
  }
  if (url.username || url.password) throw new BadRequest('credentials in the URL are not forwarded');
  const host = normalHost(url.hostname);
  if (!host) throw new BadRequest('the request URL names no host');
  return { kind: 'forward', host, port: url.port ? Number(url.port) : 80, path: `${url.pathname}${url.search}` };
}

/** The request as the origin gets it: origin-form, the checked host as `Host`, no proxy headers, one request per connection. */
function forwardedHead(head: string, target: { host: string; port: number; path: string }): string {
  const lines = head.split('\r\n');
  const [method, , version] = lines[0]!.split(' ');
  const dropped = /^(proxy-[a-z-]*|connection|keep-alive|host)\s*:/i;
  const kept = lines.slice(1).filter((l) => l.length > 0 && !dropped.test(l));
  const host = `${isIP(target.host) === 6 ? `[${target.host}]` : target.host}${target.port === 80 ? '' : `:${target.port}`}`;
  return `${method} ${target.path} ${version}\r\n${[`Host: ${host}`, ...kept, 'Connection: close'].join('\r\n')}\r\n\r\n`;
}

function answer(limits: ProxyLimits, client: Socket, status: number, text: string, body: string, headers: Record<string, string> = {}): void {
  const bytes = Buffer.from(body, 'utf8');
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  client.end(
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${bytes.length}\r\n${extra}Connection: close\r\n\r\n${bytes.toString('latin1')}`,
    'latin1',
  );
  // A client that never closes its side does not keep a connection slot.
  setTimeout(() => client.destroy(), limits.answeredLingerMs).unref();
}

/** A connection to the first address that answers within the timeout; null when none does. */
async function reach(addresses: readonly string[], port: number, timeoutMs: number): Promise<Socket | null> {
  for (const address of addresses.slice(0, 3)) {
    const socket = await new Promise<Socket | null>((resolve) => {
      const s = connect({ host: address, port });
      const timer = setTimeout(() => {
        s.destroy();
        resolve(null);
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(timer);
        resolve(s);
      });
      s.once('error', () => {
        clearTimeout(timer);
        s.destroy();
        resolve(null);
      });
    });
    if (socket) return socket;
  }
  return null;
}

/**
 * The origin's answer with its head saying `Connection: close`: the client
 * must not send its next request on this connection (the origin closes it
 * after one answer, and the next may be for another host). A head longer
 * than the bound passes unchanged.
 */
function closingResponse(upstream: Socket, maxHead: number): Readable {
  const out = new PassThrough();
  let pending: Buffer | null = Buffer.alloc(0);
  const onChunk = (chunk: Buffer): void => {
    if (pending === null) {
      if (!out.write(chunk)) upstream.pause();
      return;
    }
    pending = Buffer.concat([pending, chunk]);
    const end = pending.indexOf('\r\n\r\n');
    if (end === -1 && pending.length <= maxHead) return;
    const all = pending;
    pending = null;
    if (end === -1) {
      out.write(all);
      return;
    }
    const lines = all.subarray(0, end).toString('latin1').split('\r\n');
    // An interim answer (100 Continue) passes as it is; the final one that follows is the one rewritten.
    const interim = /^HTTP\/1\.[01] 1\d\d/.test(lines[0] ?? '');
    const kept = lines.filter((line, i) => interim || i === 0 || !/^(connection|keep-alive|proxy-connection)\s*:/i.test(line));
    out.write(Buffer.from(`${[...kept, ...(interim ? [] : ['Connection: close'])].join('\r\n')}\r\n\r\n`, 'latin1'));
    pending = interim ? Buffer.alloc(0) : null;
    const after = all.subarray(end + 4);
    if (interim && after.length > 0) onChunk(after);
    else if (after.length > 0) out.write(after);
  };
  upstream.on('data', onChunk);
  out.on('drain', () => upstream.resume());
  upstream.once('end', () => out.end());
  return out;
}

/** Bytes both ways until either side closes, or no byte has moved either way for `idleMs`. */
function join(client: Socket, answer: Readable, upstream: Socket, idleMs: number): void {
  const stop = () => {
    client.destroy();
    upstream.destroy();
  };
  for (const [socket, other] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    socket.setTimeout(idleMs, stop);
    // A byte either way re-arms both: a model stream keeps its quiet request side open.
    socket.on('data', () => other.setTimeout(idleMs));
    socket.once('close', stop);
  }
  client.pipe(upstream);
  answer.pipe(client);
  client.resume();
}
