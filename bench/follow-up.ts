/**
 * Follow-up latency: a session's first turn ends (droid_wait_for_sessions
 * says idle), then droid_send_message is called at once; the figure is the
 * time from that call to the follow-up's request arriving at the scripted
 * model. It covers everything on the follow-up's path: the previous turn's
 * cleanup (Factory title rename, close_session, droid's exit), admission,
 * worker fork, droid spawn, load_session and submission.
 *
 * Three kinds of session, interleaved so machine noise hits each alike:
 *  - untitled, droid's cloud session sync off;
 *  - titled (a rename after each turn), cloud sync off;
 *  - titled, cloud sync on (droid's default) on a host that cannot reach
 *    Factory: the rename then waits on sync retries (issue 11, item 8);
 *  - untitled, the model streaming its first answer over 1 s (not judged):
 *    with the scripted model's instant answers, the first turn is shorter
 *    than the boot of the droid started for the next turn beside it
 *    (controller/turns/next-turn-droids.ts); with a model's usual pace it is not.
 * Also printed: how the acceptance described the turn (started / queued).
 *
 * Run: npm run build && node dist/bench/follow-up.js [runs]
 */
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { makeDroidBed, type DroidBed } from '../test/support/droid-home.js';
import { script } from '../src/testbed/scripted-model.js';
import { startServer, writeConfig, type RunningServer } from '../test/support/mcp-server.js';
import { bareDroid, modelRequestWith } from './bare-droid.js';
import { recordGoal } from './goals.js';
import { median, spread } from './stats.js';
import { loggedStart, printTimelines, type StageOffsets } from './turn-timeline.js';

const DEFAULT_RUNS = 5;
/** Before each bare sample: the previous follow-up's droid has closed, so the floor is not measured beside it. */
const SETTLE_MS = 1_500;

interface Kind {
  label: string;
  title: boolean;
  cloudSync: boolean;
  /** The model streams the first turn's answer over this long (0: at once, the judged case). */
  firstTurnMs: number;
}

const KINDS: Kind[] = [
  { label: 'untitled, cloud sync off', title: false, cloudSync: false, firstTurnMs: 0 },
  { label: 'titled, cloud sync off', title: true, cloudSync: false, firstTurnMs: 0 },
  { label: 'titled, cloud sync on (offline)', title: true, cloudSync: true, firstTurnMs: 0 },
  // A model that takes a second over the first answer, as real ones do: the next turn's droid has booted by the send.
  { label: 'untitled, first answer over 1 s', title: false, cloudSync: false, firstTurnMs: 1_000 },
];

function setCloudSync(bed: DroidBed, on: boolean): void {
  const path = join(bed.home.dir, '.factory', 'settings.json');
  const settings = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  settings.cloudSessionSync = on;
  writeFileSync(path, JSON.stringify(settings, null, 2), { mode: 0o600 });
}

interface Sample {
  ms: number;
  /** What the acceptance said: admission.action when present, else latestRun.state. */
  said: string;
  /** The follow-up's start, stage by stage (the server's log). */
  stages: StageOffsets | null;
}

async function oneFollowUp(mcp: RunningServer, bed: DroidBed, root: string, kind: Kind, i: number): Promise<Sample> {
  const ws = join(root, `ws-${kind.title ? 't' : 'u'}${kind.cloudSync ? 's' : ''}${kind.firstTurnMs ? 'p' : ''}-${i}`);
  mkdirSync(ws);
  const created = await mcp.ok<{ metadata: { session: string } }>('droid_create_session', {
    requestKey: `create-${ws}`,
    workspace: ws,
    prompt: `first ${script({ text: 'first done', ...(kind.firstTurnMs && { slowMs: kind.firstTurnMs }) })}`,
    autonomy: 'off',
    replyTo: null,
    ...(kind.title ? { title: `Bench ${i}` } : {}),
  });
  const session = created.metadata.session;
  for (;;) {
    const waited = await mcp.ok<{ sessions: Array<{ agentState: string }> }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
    if (waited.sessions[0]!.agentState !== 'working') break;
  }
  const marker = `follow-up-${i}-${Math.random().toString(36).slice(2)}`;
  const t0 = Date.now();
  const accepted = await mcp.ok<{ admission?: { action: string }; status: { latestRun: { state: string } } }>('droid_send_message', {
    requestKey: `send-${ws}`,
    session,
    prompt: `${marker} ${script({ text: 'second done' })}`,
  });
  const at = await modelRequestWith(bed, marker, 60_000);
  await mcp.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
  const stages = loggedStart(mcp.stderr(), session, t0);
  if (stages) stages.model_request = at - t0;
  return { ms: at - t0, said: accepted.admission?.action ?? `state ${accepted.status.latestRun.state}`, stages };
}

export async function main(runs = DEFAULT_RUNS): Promise<void> {
  const bed = await makeDroidBed();
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-follow-')));
  // The state directory never inside an approved root (config/placement.ts).
  const approved = join(root, 'approved');
  mkdirSync(approved);
  const config = writeConfig(root, {
    approvedDirectories: [approved],
    stateDirectory: join(root, 'state'),
    droidPath: bed.droidPath,
    defaultModel: bed.modelId,
  });
  const mcp = await startServer(config, bed.home.env);
  try {
    const samples = new Map<Kind, Sample[]>(KINDS.map((k) => [k, []]));
    const bare: number[] = [];
    const bareStages: StageOffsets[] = [];
    for (let i = 0; i < runs; i++) {
      // The floor, in the same run: a bare cold droid (no server, no sandbox) spawned → initialized → its first request.
      setCloudSync(bed, false);
      await sleep(SETTLE_MS);
      const ws = join(root, `bare-${i}`);
      mkdirSync(ws);
      const b = await bareDroid(bed, ws);
      bare.push(b.ms);
      bareStages.push(b.stages);
      for (const kind of KINDS) {
        // droid reads its settings when it starts; kinds run one at a time.
        setCloudSync(bed, kind.cloudSync);
        samples.get(kind)!.push(
          await oneFollowUp(mcp, bed, approved, kind, i).catch((err: unknown) => {
            console.error(`follow-up (${kind.label}, round ${i}) failed; the server's log ends:\n${mcp.stderr().slice(-8_000)}`);
            throw err;
          }),
        );
      }
    }
    const b = median(bare);
    console.log(`follow-up sent the moment wait returns: droid_send_message → its request at the model, median of ${runs}`);
    console.log(`  ${'bare cold droid: spawn → initialize → first request'.padEnd(52)} ${b.toFixed(0).padStart(6)} ms   (${spread(bare)})`);
    for (const kind of KINDS) {
      const s = samples.get(kind)!;
      const ms = median(s.map((x) => x.ms));
      const said = [...new Set(s.map((x) => x.said))].join(', ');
      console.log(
        `  ${kind.label.padEnd(52)} ${ms.toFixed(0).padStart(6)} ms   ratio ${(ms / b).toFixed(2)}   (${spread(s.map((x) => x.ms))}; acceptance said: ${said})`,
      );
    }
    const judged = median(samples.get(KINDS[0]!)!.map((x) => x.ms));
    recordGoal({
      name: 'follow-up sent the moment wait returns (default config)',
      measured: `${judged.toFixed(0)} ms = ${(judged / b).toFixed(2)}x`,
      goal: `<= 1.00x bare ${b.toFixed(0)} ms`,
      met: judged / b <= 1,
    });
    console.log("the follow-up's start, stage by stage (the server's stages from its log):");
    printTimelines([
      { label: 'bare droid', runs: bareStages },
      ...KINDS.map((k) => ({ label: k.label, runs: samples.get(k)!.flatMap((x) => (x.stages ? [x.stages] : [])) })),
    ]);
  } finally {
    await mcp.close();
    await bed.cleanup();
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(Number(process.argv[2] ?? DEFAULT_RUNS)).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
