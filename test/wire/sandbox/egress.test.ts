/**
 * Issue 37: what a hostile turn reads and whom it talks to, with the real
 * droid CLI at `high` and scripted Execute commands. The sandbox is the one
 * the server builds from its config (hostSandboxSpec): droid in its own
 * network namespace behind its turn's proxy, the homes, the approved roots
 * and the host's data folders covered. Each check looks at the host.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostSandboxSpec } from '../../../src/sandbox/sandbox.js';
import type { TurnSpec } from '../../../src/worker/contract/protocol.js';
import { script } from '../../../src/testbed/scripted-model.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { newTag, realDroidSpec, runWorkerTurn, useRealDroid } from '../../support/wire-harness.js';

const BWRAP = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
const real = useRealDroid();
let root: string;
let tag: string;
const cleanups: Array<() => void> = [];

interface Bed {
  spec: TurnSpec;
  workspace: string;
  otherRoot: string;
}

function bed(network: { mode: 'proxy' | 'open'; allow: string[] } = { mode: 'proxy', allow: [] }, over: Partial<TurnSpec> = {}): Bed {
  tag = newTag();
  root = realpathSync(mkdtempSync(join(tmpdir(), 'egress-')));
  const approved = [join(root, 'team-a'), join(root, 'team-b')];
  const workspace = join(approved[0]!, 'project');
  const otherRoot = approved[1]!;
  const stateDirectory = join(root, 'state');
  for (const dir of [workspace, otherRoot, stateDirectory]) mkdirSync(dir, { recursive: true });
  const sandbox = hostSandboxSpec(BWRAP, { stateDirectory, approvedDirectories: approved, network, sandboxReadable: [] }, real.bed.home.env);
  const spec = realDroidSpec(real.bed, tag, { workspace, autonomy: 'high', ...over });
  spec.sandbox = sandbox;
  return { spec, workspace, otherRoot };
}

afterEach(async () => {
  while (cleanups.length) cleanups.pop()!();
  await waitForNoProcesses(tag, 10_000);
  rmSync(root, { recursive: true, force: true });
});

const execute = (command: string) => ({ name: 'Execute', arguments: { command, riskLevel: 'low', riskLevelReason: 'test' } });

/** A TCP listener on the host's loopback that counts who reached it. */
async function hostListener(body: string): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const server = http.createServer((_req, res) => {
    hits++;
    res.end(body);
  });
  server.on('connection', () => hits++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => server.close());
  return { port: (server.address() as AddressInfo).port, hits: () => hits };
}

const PY = '/usr/bin/python3';

describe("hostile turn: the service user's secrets and other roots (issue 37)", () => {
  it('a key in ~/.ssh is unreadable by $HOME and by absolute path; another approved root and a sibling project are unreadable; git identity still reads', async () => {
    const b = bed();
    const home = real.bed.home.env.HOME!;
    mkdirSync(join(home, '.ssh'), { recursive: true });
    writeFileSync(join(home, '.ssh', 'id_test'), 'SSH-KEY-SECRET\n', { mode: 0o600 });
    writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Egress Tester\n');
    mkdirSync(join(home, '.config', 'git'), { recursive: true });
    writeFileSync(join(home, '.config', 'git', 'credentials'), 'https://user:GIT-CREDENTIAL-SECRET@example.com\n');
    cleanups.push(() => rmSync(join(home, '.config'), { recursive: true, force: true }));
    cleanups.push(() => rmSync(join(home, '.ssh'), { recursive: true, force: true }));
    cleanups.push(() => rmSync(join(home, '.gitconfig'), { force: true }));
    writeFileSync(join(b.otherRoot, 'secret.txt'), 'OTHER-ROOT-SECRET\n');
    const sibling = join(b.workspace, '..', 'sibling');
    mkdirSync(sibling);
    writeFileSync(join(sibling, 'secret.txt'), 'SIBLING-SECRET\n');
    writeFileSync(join(b.workspace, 'own.txt'), 'OWN-FILE\n');
    const command = [
      'cat "$HOME/.ssh/id_test"',
      `cat ${join(home, '.ssh', 'id_test')}`,
      `cat ${join(b.otherRoot, 'secret.txt')}`,
      `cat ${join(sibling, 'secret.txt')}`,
      `ls -A ${b.otherRoot} | wc -l | sed "s/^/OTHER-ROOT-ENTRIES=/"`,
      'cat own.txt',
      'cat "$HOME/.config/git/credentials"',
      'git config --global user.name | sed "s/^/GIT-NAME=/"',
      'ls -A "$HOME" | tr "\\n" " " | sed "s/^/HOME-SHOWS=/"',
    ].join('; ');
    b.spec.prompt = `read ${script({ tool: execute(command) })}`;
    const result = await runWorkerTurn(b.spec, tag).done;
    expect(result.outcome).toBe('succeeded');
    const said = result.finalText;
    expect(said).toContain('OWN-FILE');
    expect(said).not.toContain('SSH-KEY-SECRET');
    expect(said).not.toContain('OTHER-ROOT-SECRET');
    expect(said).not.toContain('SIBLING-SECRET');
    expect(said).not.toContain('GIT-CREDENTIAL-SECRET');
    expect(said).toContain('OTHER-ROOT-ENTRIES=0');
    expect(said).toContain('GIT-NAME=Egress Tester');
    expect(said).not.toMatch(/HOME-SHOWS=.*\.ssh/);
  });
});

describe('what a turn still reads (issue 37)', () => {
  it("a workspace below a repository's top in a covered root still has git (its .git is shown, read-only)", async () => {
    const b = bed();
    const repo = join(b.workspace, '..');
    execFileSync('git', ['init', '-q', repo]);
    execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'base']);
    writeFileSync(join(b.workspace, 'new.txt'), 'x\n');
    b.spec.prompt = `git ${script({ tool: execute('git status --short . | sed "s/^/STATUS: /"; git log -1 --format=%s | sed "s/^/LOG: /"; touch ../.git/planted 2>&1 | tail -1') })}`;
    const result = await runWorkerTurn(b.spec, tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(result.finalText).toContain('STATUS: ?? ./'); // the project folder is new to the repository
    expect(result.finalText).toContain('LOG: base');
    expect(result.finalText).toMatch(/Read-only file system/);
  });
});

describe('hostile turn: whom it talks to (issue 37)', () => {
  it("the host's loopback gets no connection (bash /dev/tcp, curl, python); DNS fails; a host not allowed gets a 403 the turn reads, listed in the evidence", async () => {
    const listener = await hostListener('HOST-LOOPBACK-ANSWERED');
    const b = bed();
    const p = listener.port;
    const command = [
      `(exec 3<>/dev/tcp/127.0.0.1/${p} && printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3) 2>&1 | head -c 300; echo BASH-DONE`,
      `curl -s -m 5 --noproxy "*" http://127.0.0.1:${p}/ ; echo "CURL-DIRECT=$?"`,
      `curl -s -m 5 http://127.0.0.1:${p}/ ; echo "CURL-PROXIED=$?"`,
      `curl -s -m 5 http://169.254.169.254/latest/meta-data/ | head -c 120; echo`,
      `${PY} -c 'import socket; s=socket.create_connection(("127.0.0.1", ${p}), 3); print("PY-CONNECTED")' 2>&1 | tail -1`,
      `${PY} -c 'import socket; print(socket.getaddrinfo("example.com", 443))' 2>&1 | tail -1 | sed "s/^/PY-DNS: /"`,
      'getent hosts example.com; echo "GETENT=$?"',
      'curl -s -m 10 https://example.com/ 2>&1 | head -c 100; echo " CURL-HTTPS=$?"',
      'curl -s -m 10 http://not-allowed.example/ | head -c 400',
    ].join('; ');
    b.spec.prompt = `talk ${script({ tool: execute(command) })}`;
    const result = await runWorkerTurn(b.spec, tag).done;
    expect(result.outcome).toBe('succeeded');
    const said = result.finalText;
    expect(said).toContain('BASH-DONE');
    expect(said).not.toContain('HOST-LOOPBACK-ANSWERED');
    expect(said).not.toContain('PY-CONNECTED');
    expect(listener.hits()).toBe(0);
    expect(said).toMatch(/CURL-DIRECT=[1-9]/);
    expect(said).toMatch(/GETENT=[1-9]/);
    expect(said).toMatch(/PY-DNS: .*(gaierror|Errno)/);
    // The refusal is readable by the turn: why, and how an operator allows it.
    expect(said).toContain('droid-mcp refused not-allowed.example:80');
    expect(said).toContain('"network": {"allow"');
    const refused = result.egress?.refused ?? [];
    const hosts = refused.map((r) => `${r.host}:${r.port}`);
    expect(hosts).toEqual(expect.arrayContaining([`127.0.0.1:${p}`, '169.254.169.254:80', 'example.com:443', 'not-allowed.example:80']));
    expect(refused.every((r) => r.count >= 1 && !Number.isNaN(Date.parse(r.firstAt)))).toBe(true);
  });

  it('an allowed loopback host answers through the proxy; the same listener by a name not listed does not', async () => {
    const allowed = await hostListener('ALLOWED-ANSWERED');
    const b = bed({ mode: 'proxy', allow: [`127.0.0.1:${allowed.port}`] });
    const command = [
      `curl -s -m 5 http://127.0.0.1:${allowed.port}/ ; echo " ALLOWED=$?"`,
      `curl -s -m 5 http://localhost:${allowed.port}/ | head -c 200; echo`,
    ].join('; ');
    b.spec.prompt = `talk ${script({ tool: execute(command) })}`;
    const result = await runWorkerTurn(b.spec, tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(result.finalText).toContain('ALLOWED-ANSWERED ALLOWED=0');
    expect(result.finalText).toContain(`droid-mcp refused localhost:${allowed.port}`);
    expect(allowed.hits()).toBe(2); // one connection, one request: the allowed curl only
  });

  it("a model-only session reaches no host of the operator's list, while its model turn still runs", async () => {
    const allowed = await hostListener('ALLOWED-ANSWERED');
    const b = bed({ mode: 'proxy', allow: [`127.0.0.1:${allowed.port}`] });
    if (b.spec.sandbox.mode === 'bwrap' && b.spec.sandbox.network?.mode === 'proxy') b.spec.sandbox.network.modelOnly = true;
    b.spec.prompt = `talk ${script({ tool: execute(`curl -s -m 5 http://127.0.0.1:${allowed.port}/ | head -c 200`) })}`;
    const result = await runWorkerTurn(b.spec, tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(result.finalText).toContain(`droid-mcp refused 127.0.0.1:${allowed.port}`);
    expect(allowed.hits()).toBe(0);
  });

  it('network mode "open" keeps the host network (the listener is reached), as before issue 37', async () => {
    const listener = await hostListener('HOST-LOOPBACK-ANSWERED');
    const b = bed({ mode: 'open', allow: [] });
    b.spec.prompt = `talk ${script({ tool: execute(`curl -s -m 5 http://127.0.0.1:${listener.port}/; echo " OPEN=$?"`) })}`;
    const result = await runWorkerTurn(b.spec, tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(result.finalText).toContain('HOST-LOOPBACK-ANSWERED OPEN=0');
    expect(result.egress).toBeUndefined();
  });
});
