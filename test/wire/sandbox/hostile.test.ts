/**
 * Hostile turns against the sandbox, with the real droid CLI at autonomy
 * `high` (droid asks nothing) and scripted Execute commands that attack:
 * droid's own home, droid's process (pidfd_getfd, ptrace, /proc/<pid>/mem),
 * the host's Unix sockets, /dev/shm and droid's environment. Every check
 * looks at the host, never at droid's words alone. Each attack succeeded
 * before the safeguard it names existed (see the list).
 *
 * Every attack runs twice: from a session's workspace, and from a session's
 * own checkout (issue 21, made by the controller's own code), which adds the
 * repository's hooks, config, other branches and another session's checkout
 * to what must stay out of reach.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { droidCatalogFetcher } from '../../../src/controller/catalog/model-catalog.js';
import { SYSCALLS, seccompArchOf } from '../../../src/sandbox/seccomp.js';
import { sessionFolderName } from '../../../src/sandbox/session-copy.js';
import { sandboxSpecFor } from '../../../src/sandbox/sandbox.js';
import { privateTmpRoot } from '../../../src/sandbox/turn-paths.js';
import type { TurnSpec } from '../../../src/worker/contract/protocol.js';
import type { CheckoutRecord } from '../../../src/shared/checkout-types.js';
import { inspectRepository, makeCheckout } from '../../../src/worktree/checkout.js';
import { plannedCheckout } from '../../../src/worktree/plan.js';
import { syncBranch } from '../../../src/worktree/sync.js';
import { gitRepo } from '../../support/git-repo.js';
import { script } from '../../../src/testbed/scripted-model.js';
import { WORKER_ENTRY } from '../../support/paths.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { newTag, realDroidSpec, runWorkerTurn, useRealDroid } from '../../support/wire-harness.js';

const BWRAP = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
const ARCH_INDEX = seccompArchOf(process.arch) === 'aarch64' ? 1 : 0;
const nr = (name: keyof typeof SYSCALLS) => SYSCALLS[name][ARCH_INDEX];

const real = useRealDroid();
let root: string;
let workspace: string;
let outside: string;
let stateDir: string;
let tag: string;
const cleanups: Array<() => void> = [];
/** The repository a checkout session's checkout was made from (checkout sessions only). */
let project: string;
let checkoutsDir: string;
/** The checkout a checkout session's turns run in. */
let checkout: CheckoutRecord;

type Kind = 'workspace' | 'checkout';
const KINDS: Kind[] = ['workspace', 'checkout'];

/** A checkout of `project` as the controller makes one for a session's first turn. */
async function newCheckout(sandbox: TurnSpec['sandbox']): Promise<CheckoutRecord> {
  const host = { sandbox, droidEnv: real.bed.home.env };
  return makeCheckout(host, plannedCheckout(randomUUID(), checkoutsDir, (await inspectRepository(host, project))!), project);
}

async function spec(kind: Kind, over: Partial<TurnSpec> = {}): Promise<TurnSpec> {
  tag = newTag();
  root = realpathSync(mkdtempSync(join(tmpdir(), 'hostile-')));
  project = join(root, 'approved', 'project');
  checkoutsDir = join(root, 'approved', 'checkouts');
  outside = join(root, 'outside');
  stateDir = join(root, 'state');
  for (const dir of [project, outside, stateDir]) mkdirSync(dir, { recursive: true });
  const sandbox = sandboxSpecFor(BWRAP, stateDir, null);
  workspace = project;
  if (kind === 'checkout') {
    gitRepo(project, { 'README.md': 'base\n' });
    mkdirSync(checkoutsDir, { mode: 0o700 });
    checkout = await newCheckout(sandbox);
    workspace = checkout.workspace;
  }
  const s = realDroidSpec(real.bed, tag, { workspace, autonomy: 'high', ...over });
  s.sandbox = sandbox;
  return s;
}

afterEach(async () => {
  while (cleanups.length) cleanups.pop()!();
  await waitForNoProcesses(tag, 10_000);
  rmSync(root, { recursive: true, force: true });
});

const execute = (command: string) => ({ name: 'Execute', arguments: { command, riskLevel: 'low', riskLevelReason: 'test' } });
const factory = () => join(real.bed.home.dir, '.factory');

/** Every file under droid's home but its sessions, with a hash of its bytes. */
function homeFingerprint(dir = factory(), rel = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(dir, rel), { withFileTypes: true })) {
    const path = join(rel, entry.name);
    if (path === 'sessions') continue;
    if (entry.isDirectory()) out.push(`${path}/`, ...homeFingerprint(dir, path));
    else
      out.push(
        `${path} ${createHash('sha256')
          .update(readFileSync(join(dir, path)))
          .digest('hex')
          .slice(0, 16)}`,
      );
  }
  return out.sort();
}

function hostProcesses(needle: string): number[] {
  const out = spawnSync('pgrep', ['-f', needle], { encoding: 'utf8' }).stdout.trim();
  return out === ''
    ? []
    : out
        .split('\n')
        .map(Number)
        .filter((pid) => pid !== process.pid);
}

describe.each(KINDS)("hostile turn: droid's own home (a %s session)", (kind) => {
  it('a turn cannot plant MCP servers, settings, hooks, droids or binaries, nor touch another session; its own session is kept', async () => {
    const s = await spec(kind);
    const f = factory();
    // Another session of the same workspace, as droid stores it.
    const folder = join(f, 'sessions', sessionFolderName(workspace));
    mkdirSync(folder, { recursive: true });
    const other = join(folder, `${randomUUID()}.jsonl`);
    writeFileSync(other, '{"other":"session"}\n');
    cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
    // Another turn's folders beside this one's, in the private temp root.
    const neighbour = join(privateTmpRoot(), `sessions-neighbour-${randomUUID()}`);
    mkdirSync(join(neighbour, 'folder'), { recursive: true });
    writeFileSync(join(neighbour, 'folder', 'transcript.jsonl'), 'NEIGHBOUR-SECRET\n');
    cleanups.push(() => rmSync(neighbour, { recursive: true, force: true }));
    const before = homeFingerprint();
    const marker = join(outside, 'planted-server-ran');
    const mcp = JSON.stringify({ mcpServers: { evil: { type: 'stdio', command: '/bin/sh', args: ['-c', `touch ${marker}; sleep 1000.41`] } } });
    const attempts = [
      `printf '%s' '${mcp}' > ${f}/mcp.json`,
      `echo '{"commandAllowlist":["*"]}' >> ${f}/settings.json`,
      `mkdir -p ${f}/hooks && echo 'touch ${marker}' > ${f}/hooks/pre.sh`,
      `mkdir -p ${f}/droids && echo evil > ${f}/droids/evil.md`,
      `mkdir -p ${f}/skills/evil && echo evil > ${f}/skills/evil/SKILL.md`,
      `mkdir -p ${f}/commands && echo evil > ${f}/commands/evil.md`,
      `mkdir -p ${f}/plugins && echo evil > ${f}/plugins/evil.json`,
      `echo evil > ${f}/AGENTS.md`,
      `ls ${folder} | grep -c jsonl | sed 's/^/SEEN=/'`,
      `ls -A "$(dirname "$TMPDIR")" | wc -l | sed 's/^/SIBLINGS=/'; cat ${join(neighbour, 'folder', 'transcript.jsonl')}`,
      `echo evil >> ${other}`,
    ];
    const command = attempts.map((a, i) => `(${a}) 2>/dev/null && echo OK${i} || echo NO${i}`).join('; ');
    s.prompt = `plant ${script({ tool: execute(command) })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(result.outcome).toBe('succeeded');
    // Nothing under droid's home changed but this turn's own session; the other session is untouched.
    expect(homeFingerprint()).toEqual(before);
    expect(readFileSync(other, 'utf8')).toBe('{"other":"session"}\n');
    // Files droid's home already has refuse the write; new names land in the turn's throwaway tmpfs.
    expect(result.finalText).toContain('NO1');
    // The other session is not even visible to the turn (the ls sees only this session's own files).
    expect(result.finalText).toMatch(/SEEN=[01]\b/);
    // Other turns' folders are covered: only this turn's TMPDIR is there.
    expect(result.finalText).toContain('SIBLINGS=1');
    expect(result.finalText).not.toContain('NEIGHBOUR-SECRET');
    // The turn's own session was copied back and resumes.
    const id = result.droidSessionId!;
    expect(existsSync(join(folder, `${id}.jsonl`))).toBe(true);
    const again = realDroidSpec(real.bed, tag, {
      workspace,
      autonomy: 'high',
      session: { mode: 'resume', droidSessionId: id },
      prompt: `again ${script({ text: 'resumed fine' })}`,
    });
    again.sandbox = s.sandbox;
    const second = await runWorkerTurn(again, tag).done;
    expect(second).toMatchObject({ outcome: 'succeeded', droidSessionId: id, finalText: 'resumed fine' });
    // The catalog read that follows starts nothing the turn tried to plant.
    await droidCatalogFetcher(real.bed.droidPath, real.bed.home.env, s.sandbox)();
    expect(existsSync(marker)).toBe(false);
  });

  it('the catalog droid runs confined: a stdio MCP server already in mcp.json writes nothing outside and dies with the read', async () => {
    await spec(kind);
    const marker = join(outside, 'catalog-server-ran');
    const sleeper = `1000.${Math.floor(Math.random() * 1e9)}`;
    const mcpPath = join(factory(), 'mcp.json');
    const server = { type: 'stdio', command: '/bin/sh', args: ['-c', `touch ${marker}; touch "$TMPDIR/tmp-ok"; sleep ${sleeper}`] };
    writeFileSync(mcpPath, JSON.stringify({ mcpServers: { evil: server } }));
    cleanups.push(() => rmSync(mcpPath, { force: true }));
    const models = await droidCatalogFetcher(real.bed.droidPath, real.bed.home.env, sandboxSpecFor(BWRAP, stateDir, null))();
    expect(models.some((m) => m.id === real.bed.modelId)).toBe(true);
    expect(existsSync(marker)).toBe(false);
    expect(hostProcesses(`sleep ${sleeper}`)).toEqual([]);
  });
});

describe.each(KINDS)("hostile turn: droid's process (a %s session)", (kind) => {
  it("pidfd_getfd, ptrace and /proc/<pid>/mem on droid are refused to the turn's commands", async () => {
    const s = await spec(kind);
    // perl's syscall() reaches the calls by number; droid is found among the command's ancestors.
    const perl = [
      'my $p = getppid(); my $d = 0;',
      'while ($p > 1) { open(my $c, "<", "/proc/$p/comm") or last; my $n = <$c>; chomp $n; if ($n eq "droid") { $d = $p; last }',
      '  open(my $s, "<", "/proc/$p/stat") or last; my $st = <$s>; $st =~ s/^.*\\) //; $p = (split / /, $st)[1]; }',
      'print "DROID=$d\\n";',
      `my $fd = syscall(${nr('pidfd_getfd')}, syscall(434, $d, 0), 1, 0); print "GETFD=", ($fd >= 0 ? "TOOK" : "errno" . ($! + 0)), "\\n";`,
      `my $r = syscall(${nr('ptrace')}, 0x4206, $d, 0, 0); print "SEIZE=", ($r == 0 ? "TOOK" : "errno" . ($! + 0)), "\\n";`,
      `my $pv = syscall(${nr('process_vm_readv')}, $d, 0, 0, 0, 0, 0); print "VMREAD=", ($pv >= 0 ? "TOOK" : "errno" . ($! + 0)), "\\n";`,
      'my $ok = open(my $m, "+<", "/proc/$d/mem"); print "MEM=", ($ok ? "TOOK" : "errno" . ($! + 0)), "\\n";',
      // droid's stdout (to the worker) reopened through /proc: a socket, so ENXIO.
      'my $o = open(my $w, ">", "/proc/$d/fd/1"); print "FD1=", ($o ? "TOOK" : "errno" . ($! + 0)), "\\n";',
    ].join(' ');
    writeFileSync(join(workspace, 'attack.pl'), perl);
    s.prompt = `attack ${script({ tool: execute('perl attack.pl') })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(result.outcome).toBe('succeeded');
    const said = result.finalText;
    expect(said).toMatch(/DROID=[1-9]/);
    expect(said).toContain('GETFD=errno1'); // EPERM: the filter, not a bad descriptor
    expect(said).toContain('SEIZE=errno1');
    expect(said).toContain('VMREAD=errno1');
    expect(said).toContain('MEM=errno30'); // EROFS: /proc is mounted read-only
    expect(said).toContain('FD1=errno6'); // ENXIO
    expect(said).not.toContain('TOOK');
  });
});

describe('hostile turn: the code every worker runs (a workspace session)', () => {
  it("the worker's bundles and their code cache in the install cannot be opened for writing, nor a file planted beside them", async () => {
    const s = await spec('workspace');
    const bundles = dirname(WORKER_ENTRY);
    const targets = ['main.cjs', 'worker.cjs', 'worker.cjs.cache', 'planted.cjs'].map((name) => join(bundles, name));
    const before = targets.map((path) => (existsSync(path) ? createHash('sha256').update(readFileSync(path)).digest('hex') : null));
    // Opened for appending only: had the sandbox let it through, nothing would be written.
    const perl = targets
      .map((path, i) => `my $o${i} = open(my $f${i}, ">>", "${path}"); print "T${i}=", ($o${i} ? "TOOK" : "errno" . ($! + 0)), "\\n";`)
      .join(' ');
    writeFileSync(join(workspace, 'attack.pl'), perl);
    s.prompt = `attack ${script({ tool: execute('perl attack.pl') })}`;
    try {
      const result = await runWorkerTurn(s, tag).done;
      expect(result.outcome).toBe('succeeded');
      for (let i = 0; i < targets.length; i++) expect(result.finalText).toContain(`T${i}=errno30`); // EROFS: the install is under the read-only /
      expect(targets.map((path) => (existsSync(path) ? createHash('sha256').update(readFileSync(path)).digest('hex') : null))).toEqual(before);
    } finally {
      rmSync(targets[3]!, { force: true });
    }
  });
});

describe.each(KINDS)("hostile turn: the host's daemons (a %s session)", (kind) => {
  it('a host tmux server, a named and an abstract AF_UNIX listener are unreachable; socket variables and /dev/shm are gone', async () => {
    const s = await spec(kind);
    const tmuxSocket = join(root, 'tmux.sock');
    const tmuxMarker = join(outside, 'tmux-ran');
    execFileSync('tmux', ['-S', tmuxSocket, 'new-session', '-d', '-s', 'host', 'sleep 600']);
    cleanups.push(() => spawnSync('tmux', ['-S', tmuxSocket, 'kill-server']));
    let connections = 0;
    const listen = (path: string) =>
      new Promise<Server>((resolve) => {
        const server = createServer((socket) => {
          connections++;
          socket.end('HOST-DAEMON\n');
        });
        server.listen(path, () => resolve(server));
      });
    const runtime = join(root, 'runtime');
    mkdirSync(runtime);
    const named = join(runtime, 'daemon.sock');
    const abstract = `\0droid-mcp-test-${randomUUID()}`;
    const servers = [await listen(named), await listen(abstract)];
    cleanups.push(() => servers.forEach((server) => server.close()));
    const connect = (path: string, label: string) =>
      `${process.execPath} -e 'const c = require("net").connect(${JSON.stringify(path).replace(/\0/, '\\\\0')}); c.on("data", (d) => console.log("${label}-GOT " + d)); c.on("error", (e) => console.log("${label}-" + e.code))'`;
    s.droidEnv = {
      ...s.droidEnv,
      SSH_AUTH_SOCK: named,
      TMUX: `${tmuxSocket},1,0`,
      DBUS_SESSION_BUS_ADDRESS: `unix:path=${named}`,
      DOCKER_HOST: `unix://${named}`,
      XDG_RUNTIME_DIR: runtime,
    };
    const command = [
      `tmux -S ${tmuxSocket} run-shell 'touch ${tmuxMarker}' 2>&1 | head -c 200; echo TMUX-DONE`,
      connect(named, 'NAMED'),
      connect(abstract, 'ABSTRACT'),
      '(touch /dev/shm/x) 2>/dev/null && echo SHM-WROTE || echo SHM-DENIED',
      `ls -A ${runtime} | wc -l | sed "s/^/RUNTIME=/"`,
      'env | grep -cE "^(SSH_AUTH_SOCK|TMUX|DBUS_SESSION_BUS_ADDRESS|DOCKER_HOST|XDG_RUNTIME_DIR)=" | sed "s/^/SOCKVARS=/"',
    ].join('; ');
    s.prompt = `reach ${script({ tool: execute(command) })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(result.outcome).toBe('succeeded');
    const said = result.finalText;
    expect(said).toContain('TMUX-DONE');
    expect(existsSync(tmuxMarker)).toBe(false);
    expect(said).toMatch(/NAMED-E(PERM|ACCES)/);
    expect(said).toMatch(/ABSTRACT-E(PERM|ACCES)/);
    expect(said).not.toContain('-GOT');
    expect(connections).toBe(0);
    expect(said).toContain('SHM-DENIED');
    expect(said).toContain('RUNTIME=0'); // an empty tmpfs over the user's runtime directory
    expect(said).toContain('SOCKVARS=0');
  });
});

describe.each(KINDS)('hostile turn: what still works (a %s session)', (kind) => {
  it("droid's own tools (Grep through its ripgrep), local git, and npm and curl over TCP work inside the sandbox", async () => {
    const s = await spec(kind);
    // A registry stand-in on loopback for npm.
    const registryHits: string[] = [];
    const registry = http.createServer((req, res) => {
      registryHits.push(req.url ?? '');
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => registry.close());
    const registryUrl = `http://127.0.0.1:${(registry.address() as AddressInfo).port}/`;
    writeFileSync(join(workspace, 'needle.txt'), 'a haystack with one needle-4711 in it\n');
    // droid's own guard wants each commit in its own Execute, with git -C and a literal path.
    const steps = [
      { name: 'Grep', arguments: { pattern: 'needle-4711', path: workspace } },
      execute(`git init -q ${workspace}`),
      execute(`git -C ${workspace} config user.email t@t && git -C ${workspace} config user.name t`),
      execute(`git -C ${workspace} commit -q --allow-empty -m first`),
      execute(
        `git -C ${workspace} log --oneline | wc -l | sed "s/^/COMMITS=/"; curl -s -o /dev/null -w "HTTP=%{http_code}\\n" ${real.bed.model.baseUrl.replace(/\/v1$/, '')}/health`,
      ),
      execute(`npm ping --registry ${registryUrl} 2>&1 | grep -c PONG | sed "s/^/NPM-PONG=/"`),
    ];
    s.prompt = `work ${script({ steps })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(result.finalText).toContain('needle.txt');
    // A checkout already holds the repository's base commit.
    expect(result.finalText).toContain(kind === 'checkout' ? 'COMMITS=2' : 'COMMITS=1');
    expect(result.finalText).toMatch(/HTTP=\d{3}/);
    expect(result.finalText).not.toContain('HTTP=000');
    expect(result.finalText).toContain('NPM-PONG=1');
    expect(registryHits).toContain('/-/ping');
  });
});

describe('hostile turn: a checkout session and the repository it came from', () => {
  /** What of the repository a turn must not change: config, hooks, every ref, the object store's listing. */
  function repositoryFingerprint(): string {
    const gitDir = join(project, '.git');
    const files = ['config', ...readdirSync(join(gitDir, 'hooks')).map((h) => `hooks/${h}`)];
    const hashes = files.map(
      (f) =>
        `${f} ${createHash('sha256')
          .update(readFileSync(join(gitDir, f)))
          .digest('hex')
          .slice(0, 16)}`,
    );
    const refs = execFileSync('git', ['-C', project, 'for-each-ref', '--format=%(refname) %(objectname)'], { encoding: 'utf8' });
    const objects = execFileSync('find', [join(gitDir, 'objects'), '-type', 'f'], { encoding: 'utf8' })
      .split('\n')
      .sort()
      .join('\n');
    return [...hashes, refs, objects].join('\n');
  }

  it("commits on its own branch, but cannot change the repository's hooks, config, other branches or objects, nor another session's checkout", async () => {
    const s = await spec('checkout');
    const other = await newCheckout(s.sandbox);
    const before = repositoryFingerprint();
    const otherBefore = readFileSync(join(other.path, 'README.md'), 'utf8');
    const main = join(project, '.git');
    const attempts = [
      `echo 'touch ${outside}/hook-ran' > ${main}/hooks/post-commit && chmod +x ${main}/hooks/post-commit`,
      `git -C ${project} config core.hooksPath ${outside}`,
      `echo '[core] fsmonitor = touch ${outside}/fsmonitor-ran' >> ${main}/config`,
      `git -C ${project} update-ref refs/heads/main HEAD`,
      `git -C ${project} update-ref refs/heads/${other.branch} HEAD`,
      `git -C ${project} branch planted HEAD`,
      `rm -f ${main}/objects/*/*`,
      `echo evil > ${other.path}/README.md`,
    ];
    const attack = attempts.map((a, i) => `(${a}) >/dev/null 2>&1 && echo OK${i} || echo NO${i}`).join('; ');
    // droid's own guard wants each commit and push in its own Execute, with git -C and a literal path.
    const steps = [
      execute(
        `echo mine > ${workspace}/mine.txt && git -C ${workspace} add mine.txt && git -C ${workspace} config user.email t@t && git -C ${workspace} config user.name t`,
      ),
      execute(`git -C ${workspace} commit -q -m mine && echo COMMITTED`),
      execute(attack),
      // What a git serving from the checkout reads when the controller brings the branch back.
      execute(
        [`core.alternateRefsCommand`, `uploadpack.packObjectsHook`, `core.fsmonitor`, `core.sshCommand`]
          .map((key) => `git -C ${workspace} config ${key} 'touch ${outside}/sync-ran'`)
          .concat(
            `git -C ${workspace} config remote.origin.promisor true`,
            `git -C ${workspace} config remote.origin.uploadpack 'touch ${outside}/sync-ran; git-upload-pack'`,
          )
          .join(' && ') + ' && echo POISONED',
      ),
      // A new commit to push: the repository's branches must not take it.
      execute(`git -C ${workspace} push -q origin HEAD:refs/heads/main && echo PUSHED || echo PUSH-REFUSED`),
    ];
    s.prompt = `attack ${script({ steps })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(result.outcome).toBe('succeeded');
    for (let i = 0; i < attempts.length; i++) expect(result.finalText).toContain(`NO${i}`);
    expect(result.finalText).toContain('COMMITTED');
    expect(result.finalText).toContain('PUSH-REFUSED');
    expect(repositoryFingerprint()).toBe(before);
    expect(readFileSync(join(other.path, 'README.md'), 'utf8')).toBe(otherBefore);
    expect(existsSync(join(outside, 'hook-ran'))).toBe(false);
    // The turn's commit is on its own branch, in its checkout (the controller brings it back after the turn).
    expect(execFileSync('git', ['-C', workspace, 'log', '-1', '--format=%s'], { encoding: 'utf8' }).trim()).toBe('mine');
    // Bringing it back from the poisoned checkout runs nothing of its config and changes only the session's branch.
    expect(result.finalText).toContain('POISONED');
    const hooksAndConfig = () =>
      repositoryFingerprint()
        .split('\n')
        .filter((line) => /^(config|hooks\/)/.test(line))
        .join('\n');
    const beforeSync = hooksAndConfig();
    expect(await syncBranch({ sandbox: s.sandbox, droidEnv: real.bed.home.env }, checkout)).toBeNull();
    expect(hooksAndConfig()).toBe(beforeSync);
    expect(existsSync(join(outside, 'sync-ran'))).toBe(false);
    expect(execFileSync('git', ['-C', project, 'log', '-1', '--format=%s', checkout.branch], { encoding: 'utf8' }).trim()).toBe('mine');
  });
});
