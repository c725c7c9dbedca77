/**
 * The MCP transport of one stateless HTTP exchange, answering in JSON only.
 *
 * It replaces the SDK's Streamable HTTP server transport, which per POST
 * builds Web Request/Response objects, checks every message against zod
 * schemas again and can also stream SSE, none of which a stateless JSON
 * endpoint needs: the listener has already read and validated the body as
 * JSON-RPC (envelope.ts), so this transport is handed the messages,
 * delivers them to the MCP server it is connected to, and collects exactly
 * one response per request id. Whatever else the server sends (progress and
 * other notifications, requests to the client) has no place in a JSON
 * answer and is dropped, as the SDK transport does in JSON response mode.
 */
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo, RequestId } from '@modelcontextprotocol/sdk/types.js';

/** A JSON-RPC response or error response: what answers a request. */
export type JsonRpcAnswer = Extract<JSONRPCMessage, { id?: RequestId }> & ({ result: unknown } | { error: unknown });

/** Cheap and exact for messages that passed JSONRPCMessageSchema (its members are strict objects). */
export function isRequest(message: JSONRPCMessage): message is Extract<JSONRPCMessage, { method: string; id: RequestId }> {
  return 'method' in message && 'id' in message;
}

function isAnswer(message: JSONRPCMessage): message is JsonRpcAnswer {
  return 'result' in message || 'error' in message;
}

export class JsonExchangeTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  /** The answers, in the order of `requestIds`, once every request has one. */
  readonly answered: Promise<JsonRpcAnswer[]>;

  readonly #answers = new Map<RequestId, JsonRpcAnswer | undefined>();
  #missing: number;
  #resolve!: (answers: JsonRpcAnswer[]) => void;
  #started = false;
  #closed = false;

  /** `requestIds`: the ids of the requests this exchange answers, distinct. */
  constructor(requestIds: readonly RequestId[]) {
    for (const id of requestIds) {
      if (this.#answers.has(id)) throw new Error(`request id ${JSON.stringify(id)} appears twice in one exchange`);
      this.#answers.set(id, undefined);
    }
    this.#missing = this.#answers.size;
    this.answered = new Promise((resolve) => (this.#resolve = resolve));
    if (this.#missing === 0) this.#resolve([]);
  }

  async start(): Promise<void> {
    if (this.#started) throw new Error('Transport already started');
    this.#started = true;
  }

  /** Hands the exchange's messages to the connected server, in order. */
  deliver(messages: readonly JSONRPCMessage[], extra: MessageExtraInfo): void {
    if (!this.#started || this.#closed) throw new Error('the transport is not connected');
    for (const message of messages) this.onmessage?.(message, extra);
  }

  async send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    // A JSON answer carries responses only; after close nobody is listening.
    if (!isAnswer(message) || this.#closed) return;
    const id = message.id;
    if (id === undefined || !this.#answers.has(id) || this.#answers.get(id) !== undefined) {
      throw new Error(`no request with id ${JSON.stringify(id)} is waiting for an answer`);
    }
    this.#answers.set(id, message);
    if (--this.#missing === 0) this.#resolve([...this.#answers.values()] as JsonRpcAnswer[]);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.onclose?.();
  }
}
