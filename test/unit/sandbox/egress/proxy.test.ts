import http from 'node:http';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAllowEntry, type AllowEntry } from '../../../../src/shared/egress-policy.js';
import { startEgressProxy, type EgressProxy } from '../../../../src/sandbox/egress/proxy.js';
import { attachEgress } from '../../../../src/sandbox/egress/turn-egress.js';

const closers: Array<() => void> = [];
afterEach(() => {
  while (closers.length) closers.pop()!();
});

async function listening(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => server.close());
  return (server.address() as AddressInfo).port;
}

async function origin(): Promise<{ port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url} ${req.headers.connection ?? ''} ${req.headers['proxy-connection'] ?? ''}`);
    res.setHeader('connection', 'keep-alive');
    res.end('ORIGIN');
  });
  return { port: await listening(server), hits };
}

async function proxy(allow: string[], options: Partial<Parameters<typeof startEgressProxy>[1]> = {}): Promise<{ port: number; proxy: EgressProxy }> {
  const server = createServer();
  const port = await listening(server);
  const entries = allow.map((a) => parseAllowEntry(a) as AllowEntry);
  const p = startEgressProxy(server, { entries, ...options });
  closers.push(() => p.close());
  return { port, proxy: p };
}

/** Sends raw bytes and reads until the proxy closes, the origin's body has come (a client then closes), or `ms`. */
function exchange(port: number, bytes: string, ms = 3000): Promise<string> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, '127.0.0.1');
    let got = '';
    socket.on('data', (d) => {
      got += d.toString('latin1');
      if (got.endsWith('ORIGIN')) socket.destroy();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(got));
    setTimeout(() => {
      socket.destroy();
      resolve(got);
    }, ms);
    socket.write(bytes);
  });
}

describe('egress proxy', () => {
  it('forwards an allowed plain-http request in origin form, one request per connection, and tells the client so', async () => {
    const o = await origin();
    const { port } = await proxy([`127.0.0.1:${o.port}`]);
    const answer = await exchange(
      port,
      `GET http://127.0.0.1:${o.port}/a?b=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    expect(answer).toMatch(/\r\nConnection: close\r\n/);
    expect(answer).not.toMatch(/keep-alive/i);
    expect(answer.endsWith('ORIGIN')).toBe(true);
    expect(o.hits).toEqual(['GET /a?b=1 close ']);
  });

  it('tunnels an allowed CONNECT and refuses the rest with a 403 that says how to allow it, counting each destination once listed', async () => {
    const o = await origin();
    const refusals: string[] = [];
    const { port, proxy: p } = await proxy([`127.0.0.1:${o.port}`], { onRefusal: (r) => refusals.push(`${r.host}:${r.port}`) });
    const tunnel = await exchange(port, `CONNECT 127.0.0.1:${o.port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(tunnel).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200/);
    for (let i = 0; i < 3; i++) {
      const refused = await exchange(port, `CONNECT evil.example:443 HTTP/1.1\r\n\r\n`);
      expect(refused).toMatch(/^HTTP\/1\.1 403/);
      expect(refused).toContain('"network": {"allow"');
    }
    expect(await exchange(port, `GET http://127.0.0.1:${o.port + 1}/ HTTP/1.1\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403/);
    expect(refusals).toEqual(['evil.example:443', `127.0.0.1:${o.port + 1}`]);
    const report = p.refusals();
    expect(report.refused.map((r) => [r.host, r.count])).toEqual([
      ['evil.example', 3],
      ['127.0.0.1', 1],
    ]);
  });

  it('is no relay to an internal address: a listed public name that resolves to loopback is refused, never connected', async () => {
    const o = await origin();
    const { port } = await proxy(['rebind.example'], { resolve: async () => ['127.0.0.1'] });
    const answer = await exchange(port, `GET http://rebind.example:80/ HTTP/1.1\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 403/);
    expect(answer).toContain('internal address');
    expect(o.hits).toEqual([]);
  });

  it('bounds the request head, the time to send it, connections, and the refusals it lists', async () => {
    const { port, proxy: p } = await proxy([], { limits: { headTimeoutMs: 200, maxConnections: 2, maxListedRefusals: 2 } });
    expect(await exchange(port, `GET http://x.example/ HTTP/1.1\r\nX: ${'a'.repeat(20_000)}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 431/);
    expect(await exchange(port, `GET http://x.example/${'a'.repeat(9000)} HTTP/1.1`)).toMatch(/^HTTP\/1\.1 431/);
    // A client that never finishes its head is dropped.
    const started = Date.now();
    expect(await exchange(port, 'GET http://x.example/ HTTP/1.1\r\n', 5000)).toBe('');
    expect(Date.now() - started).toBeLessThan(4000);
    // Two held connections fill it: a third is closed at once.
    const held = [connect(port, '127.0.0.1'), connect(port, '127.0.0.1')];
    held.forEach((s) => s.on('error', () => undefined));
    await new Promise((r) => setTimeout(r, 100));
    expect(await exchange(port, `CONNECT a.example:443 HTTP/1.1\r\n\r\n`, 1000)).toBe('');
    held.forEach((s) => s.destroy());
    await new Promise((r) => setTimeout(r, 100));
    for (const host of ['a', 'b', 'c', 'd']) await exchange(port, `CONNECT ${host}.example:443 HTTP/1.1\r\n\r\n`);
    expect(p.refusals()).toMatchObject({ othersRefused: 2 });
    expect(p.refusals().refused).toHaveLength(2);
  });

  it('answers 400 to what is not a proxy request, and closes every connection when closed', async () => {
    const { port, proxy: p } = await proxy(['x.example']);
    expect(await exchange(port, 'GET / HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400[\s\S]*absolute http/);
    expect(await exchange(port, 'GET https://x.example/ HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400[\s\S]*CONNECT/);
    expect(await exchange(port, 'CONNECT x.example HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
    expect(await exchange(port, 'HELLO\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
    const open = connect(port, '127.0.0.1');
    const closed = new Promise((resolve) => open.on('close', resolve));
    open.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, 50));
    p.close();
    await closed;
  });

  it('sends the checked host as Host, and rewrites the final head after a 100 Continue', async () => {
    const server = createServer((socket) => {
      let got = '';
      socket.on('data', (d) => {
        got += d.toString('latin1');
        if (!got.includes('\r\n\r\n')) return;
        const host = /\r\nHost: ([^\r]*)/i.exec(got)?.[1];
        socket.end(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: ${6 + (host ?? '').length}\r\n\r\nORIGIN${host}`);
      });
    });
    const port = await listening(server);
    const { port: proxyPort } = await proxy([`127.0.0.1:${port}`]);
    const answer = await exchange(
      proxyPort,
      `POST http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: evil.example\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n`,
      1000,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK\r\nContent-Length: \d+\r\nConnection: close\r\n\r\nORIGIN/);
    expect(answer.endsWith(`ORIGIN127.0.0.1:${port}`)).toBe(true);
  });

  it('drops a client whose head drips in past its deadline', async () => {
    const { port } = await proxy([], { limits: { headTimeoutMs: 300 } });
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
    const started = Date.now();
    const drip = setInterval(() => socket.write('a'), 50);
    const at = await closed;
    clearInterval(drip);
    expect(at - started).toBeLessThan(2000);
  });

  it('closes an answered connection the client keeps open, so refused clients cannot fill its slots', async () => {
    const { port } = await proxy([], { limits: { answeredLingerMs: 200, maxConnections: 1 } });
    // A client that keeps its side open after the answer (half-open), as a hostile one would: it holds the only slot.
    const holder = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    holder.on('error', () => undefined);
    closers.push(() => holder.destroy());
    let got = '';
    holder.on('data', (d) => (got += d.toString('latin1')));
    holder.write('CONNECT a.example:443 HTTP/1.1\r\n\r\n');
    await new Promise((r) => setTimeout(r, 600));
    expect(got).toMatch(/^HTTP\/1\.1 403/);
    // The slot came free: the next client is answered, not dropped.
    expect(await exchange(port, 'CONNECT b.example:443 HTTP/1.1\r\n\r\n', 1000)).toMatch(/^HTTP\/1\.1 403/);
  });

  it('serves connections droid made before the proxy was attached (they are held, not left hanging)', async () => {
    const server = createServer();
    const held: Socket[] = [];
    const hold = (s: Socket) => {
      s.pause();
      held.push(s);
    };
    server.on('connection', hold);
    const port = await listening(server);
    const early = exchange(port, 'CONNECT early.example:443 HTTP/1.1\r\n\r\n');
    await new Promise((r) => setTimeout(r, 100));
    const egress = attachEgress(Promise.resolve({ server, take: () => (server.off('connection', hold), held.splice(0)) }), []);
    closers.push(() => egress.close());
    await egress.ready;
    expect(await early).toMatch(/^HTTP\/1\.1 403/);
    expect(egress.report().refused.map((r) => r.host)).toEqual(['early.example']);
  });
});
