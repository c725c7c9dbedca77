/**
 * The tools' context of a stdio server that answers initialize and
 * tools/list before its state is loaded (cli.ts): a tool call waits here
 * until the controller exists, for at most `boundMs`, then is refused as
 * retryable. The gate opens once; a state that fails to load never opens
 * it, and the process exits with its refusal instead.
 */
import { ControllerError } from '../shared/public-error.js';
import type { ToolContext } from './tools.js';

/** How long a tool call waits for start-up. Loading 100,000 runs takes under a second; a racing start-up's lock is waited for ~15 s. */
const STARTUP_WAIT_MS = 30_000;

export class ContextGate {
  #context: ToolContext | undefined;
  #open!: (ctx: ToolContext) => void;
  readonly #opened = new Promise<ToolContext>((resolve) => (this.#open = resolve));

  /** `onWait` is told each time a call has to wait (cli.ts then starts loading at once). */
  constructor(
    private readonly boundMs = STARTUP_WAIT_MS,
    private readonly onWait: () => void = () => undefined,
  ) {}

  open(ctx: ToolContext): void {
    this.#context = ctx;
    this.#open(ctx);
  }

  /** The context, once start-up has made it; `controller_starting` (retryable) after the bound. */
  context(): Promise<ToolContext> {
    if (this.#context !== undefined) return Promise.resolve(this.#context);
    this.onWait();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(starting(this.boundMs)), this.boundMs);
      void this.#opened.then((ctx) => {
        clearTimeout(timer);
        resolve(ctx);
      });
    });
  }
}

function starting(boundMs: number): ControllerError {
  return new ControllerError(
    'controller_starting',
    `the controller is still loading its state directory after ${Math.round(boundMs / 1000)} s; nothing was done`,
    'Retry in a few seconds. If it persists, ask the operator to check the controller log: start-up may be waiting for another controller on the same state directory.',
    true,
  );
}
