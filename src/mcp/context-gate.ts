/**
 * The tools' context of a stdio server that answers initialize and
 * tools/list before its state is loaded (cli.ts): a tool call waits here
 * until the controller exists, for at most `boundMs`, then is refused as
 * retryable. The gate opens once, or is refused once: a state that fails to
 * load after a client was answered refuses it with that refusal
 * (startup-refusal.ts), and every waiting and later call is answered with it
 * until the process exits.
 */
import { ControllerError } from '../shared/public-error.js';
import type { ToolContext } from './tools.js';

/** How long a tool call waits for start-up. Loading 100,000 runs takes under a second; a racing start-up's lock is waited for ~15 s. */
const STARTUP_WAIT_MS = 30_000;

export class ContextGate {
  #context: ToolContext | undefined;
  #refusal: ControllerError | undefined;
  #open!: (ctx: ToolContext) => void;
  #refuse!: (err: ControllerError) => void;
  readonly #settled = new Promise<ToolContext>((resolve, reject) => {
    this.#open = resolve;
    this.#refuse = reject;
  });

  /** `onWait` is told each time a call has to wait (cli.ts then starts loading at once). */
  constructor(
    private readonly boundMs = STARTUP_WAIT_MS,
    private readonly onWait: () => void = () => undefined,
  ) {
    // Nobody may be waiting when it is refused.
    this.#settled.catch(() => undefined);
  }

  open(ctx: ToolContext): void {
    this.#context = ctx;
    this.#open(ctx);
  }

  /** No context will come: every waiting and later call is answered with `err`. */
  refuse(err: ControllerError): void {
    this.#refusal = err;
    this.#refuse(err);
  }

  /** The context, once start-up has made it; the refusal, once refused; `controller_starting` (retryable) after the bound. */
  context(): Promise<ToolContext> {
    if (this.#context !== undefined) return Promise.resolve(this.#context);
    if (this.#refusal !== undefined) return Promise.reject(this.#refusal);
    this.onWait();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(starting(this.boundMs)), this.boundMs);
      this.#settled.then(
        (ctx) => {
          clearTimeout(timer);
          resolve(ctx);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
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
