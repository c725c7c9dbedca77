/**
 * One MCP server, connected once, that answers for every HTTP exchange at
 * once the requests that need nothing of a client: `tools/call`,
 * `tools/list` and `ping`. Connecting and closing a lent server for each of
 * them (idle-servers.ts) was a tenth of the HTTP transport's CPU per call.
 *
 * Requests of different exchanges may carry the same JSON-RPC id (every
 * client numbers from 1), so each is delivered under an id of this server's
 * own and its answer is handed back under the caller's id. Nothing a caller
 * sends reaches this server except such a request: `initialize`,
 * `logging/setLevel`, notifications (a caller's `notifications/cancelled`
 * included), responses and batches still go to a lent server of their own,
 * so no caller can name, cancel or configure another caller's request. When
 * an exchange is abandoned (client gone, deadline), its handler is cancelled
 * the way MCP cancels a request, whatever it answers later is dropped, and
 * the server is replaced (see `#retire`).
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, JSONRPCRequest, MessageExtraInfo, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { ExchangeEnd } from './exchange-end.js';
import { isAnswer, isRequest, type JsonRpcAnswer } from './json-transport.js';
import { requestEntry, type RequestEntry } from '../request-entry.js';

/** The methods whose handlers read nothing the client declared (capabilities, log level). */
const SHARED_METHODS: ReadonlySet<string> = new Set(['tools/call', 'tools/list', 'ping']);

/** Whether an exchange of exactly this one request may be answered by the shared server. */
export function answersAlone(message: JSONRPCMessage): message is JSONRPCRequest {
  return isRequest(message) && SHARED_METHODS.has(message.method);
}

/** The transport between the shared server and the exchanges waiting on it. */
class MultiplexTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  /** Answer handlers by this server's own request id. */
  readonly waiting = new Map<number, (answer: JsonRpcAnswer) => void>();

  async start(): Promise<void> {}

  deliver(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    if (!this.onmessage) throw new Error('the shared MCP server is not connected');
    this.onmessage(message, extra);
  }

  async send(message: JSONRPCMessage): Promise<void> {
    // Progress and other notifications have no place in a JSON answer; an
    // answer nobody waits for any more (its exchange was abandoned) is dropped.
    if (!isAnswer(message) || typeof message.id !== 'number') return;
    const handler = this.waiting.get(message.id);
    if (handler === undefined) return;
    this.waiting.delete(message.id);
    handler(message);
  }

  async close(): Promise<void> {
    this.onclose?.();
  }
}

/**
 * One server and its transport: current until a request of it is abandoned
 * (then retired: not current), and closed once nothing waits on it.
 */
interface Generation {
  readonly transport: MultiplexTransport;
  /** The server, connected, and where a request is handed to it (request-entry.ts). */
  readonly server: Promise<{ server: Server; deliver: RequestEntry }>;
}

export class SharedServer {
  #current: Generation | undefined;
  /** Retired generations still answering requests delivered to them. */
  readonly #retiring = new Set<Generation>();
  /** Request ids of this server's own; 0 is never used (the SDK ignores a cancellation of id 0). */
  #lastId = 0;

  constructor(private readonly make: () => Server) {}

  /**
   * Answers one request, under the caller's id. Rejects with the end's
   * reason when the exchange ends first; the handler is then cancelled. Handlers see
   * the internal id as `extra.requestId` (none of ours reads it).
   */
  async answer(request: JSONRPCRequest, extra: MessageExtraInfo, end: ExchangeEnd): Promise<JsonRpcAnswer> {
    let generation = this.#generation();
    let { deliver } = await generation.server;
    // Retired while it connected (another request was abandoned meanwhile): take the next one.
    while (generation !== this.#current) {
      generation = this.#generation();
      ({ deliver } = await generation.server);
    }
    if (end.reason !== undefined) throw end.reason;
    const { transport } = generation;
    const id = ++this.#lastId;
    const callerId: RequestId = request.id;
    return new Promise<JsonRpcAnswer>((resolve, reject) => {
      const onEnd = (reason: Error) => {
        transport.waiting.delete(id);
        // The reason reaches the handler's signal as this string (a notification carries no Error).
        transport.deliver({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'the HTTP exchange ended' } });
        this.#retire(generation);
        reject(reason);
      };
      transport.waiting.set(id, (answer) => {
        end.unlisten(onEnd);
        if (generation !== this.#current) this.#closeWhenIdle(generation);
        resolve({ ...answer, id: callerId });
      });
      end.listen(onEnd);
      try {
        deliver({ ...request, id }, extra);
      } catch (err) {
        transport.waiting.delete(id);
        end.unlisten(onEnd);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Requests delivered and neither answered nor abandoned, over every generation. */
  get pending(): number {
    let n = this.#current?.transport.waiting.size ?? 0;
    for (const g of this.#retiring) n += g.transport.waiting.size;
    return n;
  }

  /** Generations not yet closed: the current one and those retiring. */
  get open(): number {
    return (this.#current ? 1 : 0) + this.#retiring.size;
  }

  /** The one in use, built and connected on first use; one that fails to connect is dropped, so the next request tries again. */
  #generation(): Generation {
    if (this.#current !== undefined) return this.#current;
    const transport = new MultiplexTransport();
    const generation: Generation = {
      transport,
      server: (async () => {
        const server = this.make();
        await server.connect(transport);
        return { server, deliver: requestEntry(server) ?? ((request, extra) => transport.deliver(request, extra)) };
      })(),
    };
    this.#current = generation;
    generation.server.catch(() => {
      if (this.#current === generation) this.#current = undefined;
    });
    return generation;
  }

  /**
   * An abandoned request's handler may never settle, and the SDK forgets a
   * request only when its handler does (closing forgets them all). So the
   * generation takes no new requests and is closed once the rest are answered,
   * as a lent server is never lent again after an exchange that did not end cleanly.
   */
  #retire(generation: Generation): void {
    if (generation !== this.#current) return;
    this.#current = undefined;
    this.#retiring.add(generation);
    this.#closeWhenIdle(generation);
  }

  #closeWhenIdle(generation: Generation): void {
    if (generation.transport.waiting.size > 0 || !this.#retiring.delete(generation)) return;
    // Closing aborts whatever still runs (the abandoned handlers) and clears the SDK's per-request maps.
    void generation.server.then(({ server }) => server.close()).catch(() => undefined);
  }
}
