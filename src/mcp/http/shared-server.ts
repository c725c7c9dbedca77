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
 * the way MCP cancels a request, and whatever it answers later is dropped.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, JSONRPCRequest, MessageExtraInfo, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { abortReason } from './abort.js';
import { isAnswer, type JsonRpcAnswer } from './json-transport.js';

/** The methods whose handlers read nothing the client declared (capabilities, log level). */
const SHARED_METHODS: ReadonlySet<string> = new Set(['tools/call', 'tools/list', 'ping']);

/** Whether an exchange of exactly this one request may be answered by the shared server. */
export function answersAlone(message: JSONRPCMessage): message is JSONRPCRequest {
  return 'method' in message && 'id' in message && SHARED_METHODS.has(message.method);
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

export class SharedServer {
  readonly #transport = new MultiplexTransport();
  #server: Promise<Server> | undefined;
  /** This server's own request ids; 0 is never used (the SDK ignores a cancellation of id 0). */
  #lastId = 0;

  constructor(private readonly make: () => Server) {}

  /**
   * Answers one request, under the caller's id. Rejects with the signal's
   * reason when it aborts first; the handler is then cancelled.
   */
  async answer(request: JSONRPCRequest, extra: MessageExtraInfo, signal: AbortSignal): Promise<JsonRpcAnswer> {
    await this.#connected();
    if (signal.aborted) throw abortReason(signal);
    const id = ++this.#lastId;
    const callerId: RequestId = request.id;
    return new Promise<JsonRpcAnswer>((resolve, reject) => {
      const onAbort = () => {
        this.#transport.waiting.delete(id);
        this.#transport.deliver({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'the HTTP exchange ended' } });
        reject(abortReason(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#transport.waiting.set(id, (answer) => {
        signal.removeEventListener('abort', onAbort);
        resolve({ ...answer, id: callerId });
      });
      this.#transport.deliver({ ...request, id }, extra);
    });
  }

  /** Requests delivered and not yet answered (nor abandoned). */
  get pending(): number {
    return this.#transport.waiting.size;
  }

  /** Built and connected on first use; a failure is not kept, so the next request tries again. */
  #connected(): Promise<Server> {
    if (this.#server === undefined) {
      const connecting = (async () => {
        const server = this.make();
        await server.connect(this.#transport);
        return server;
      })();
      this.#server = connecting;
      connecting.catch(() => {
        if (this.#server === connecting) this.#server = undefined;
      });
    }
    return this.#server;
  }
}
