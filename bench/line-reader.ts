/**
 * CPU cost of reading one long frame line (1, 4 and 16 MB of JSON arriving in
 * 64 KiB pipe-sized chunks), for the LineReader and for the previous design
 * (append every chunk to one string, search it from the start), kept here as
 * the baseline. The new reader should grow linearly with the line (16/1 MB
 * ratio near 16); the baseline grows quadratically.
 *
 * Run: npm run build && node dist/bench/line-reader.js
 */
import { fileURLToPath } from 'node:url';
import { LineReader } from '../src/droid/line-reader.js';

const SIZES_MB = [1, 4, 16];
const CHUNK = 64 * 1024;
const ROUNDS = 3;

/** The reader before issue 8, reduced to its splitting loop. */
class AppendAndSearchFromStart {
  private buffer = '';
  constructor(private readonly onLine: (line: string) => void) {}
  push(chunk: string): void {
    this.buffer += chunk;
    let newline: number;
    while ((newline = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      this.onLine(line);
    }
  }
}

function chunksOf(text: string): string[] {
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += CHUNK) chunks.push(text.slice(i, i + CHUNK));
  return chunks;
}

function best(run: () => void): number {
  let fastest = Infinity;
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = performance.now();
    run();
    fastest = Math.min(fastest, performance.now() - t0);
  }
  return fastest;
}

export interface LineReaderFigures {
  megabytes: number;
  readerMs: number;
  baselineMs: number;
}

export function main(): LineReaderFigures[] {
  const results: LineReaderFigures[] = [];
  console.log(`one JSON line in ${CHUNK / 1024} KiB chunks, best of ${ROUNDS} (ms); JSON.parse included in the reader's figure`);
  console.log('size      reader  baseline(split only)');
  for (const mb of SIZES_MB) {
    const line = `{"big":"${'p'.repeat(mb * 1_000_000)}"}\n`;
    const chunks = chunksOf(line);
    let values = 0;
    const readerMs = best(() => {
      const reader = new LineReader({ value: () => values++, stray: (s) => console.error(`unexpected stray: ${s.reason}`) });
      for (const chunk of chunks) reader.push(chunk);
    });
    let lines = 0;
    const baselineMs = best(() => {
      const old = new AppendAndSearchFromStart(() => lines++);
      for (const chunk of chunks) old.push(chunk);
    });
    if (values !== ROUNDS || lines !== ROUNDS) throw new Error(`expected ${ROUNDS} lines per design, got ${values} and ${lines}`);
    results.push({ megabytes: mb, readerMs, baselineMs });
    console.log(`${`${mb} MB`.padEnd(8)} ${readerMs.toFixed(1).padStart(7)} ${baselineMs.toFixed(1).padStart(9)}`);
  }
  const small = results[0]!;
  const large = results[results.length - 1]!;
  const growth = large.megabytes / small.megabytes;
  console.log(
    `growth ${large.megabytes}/${small.megabytes} MB: reader ${(large.readerMs / small.readerMs).toFixed(1)}x, ` +
      `baseline ${(large.baselineMs / small.baselineMs).toFixed(1)}x (linear = ${growth}x)`,
  );
  return results;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main();
}
