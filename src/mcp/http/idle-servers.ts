/**
 * MCP servers for the stateless HTTP transport, lent to one exchange at a
 * time (every exchange: a lone tools/call as much as an initialize or a
 * batch) and reused, so an exchange does not pay for building a server (its
 * handler table and JSON Schema validator) every time. Each is reached only
 * through the SDK's own transport callback: nothing here depends on the
 * SDK's private members.
 *
 * What is per request stays per request: each request gets a transport of
 * its own (json-transport.ts) and the server is connected to it alone
 * for that request. Closing the connection is what
 * makes a server fit for the next one: the SDK's `Protocol` keeps every
 * request's state (abort controllers by request id, progress and response
 * handlers, timeouts) per connection and clears it on close, and a handler
 * that outlives its connection answers only the transport it was called
 * through. What a server remembers beyond its connection is the client it was
 * initialized by (capabilities, name and version) and the log level a
 * `logging/setLevel` set; a server that took either is therefore never lent
 * again (exchange.ts), and neither is one whose request did not end cleanly
 * (abort, deadline, failure).
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';

/** Idle servers kept; more than this in flight are built for the moment and dropped after. */
const MAX_IDLE_SERVERS = 32;

export interface ServerLender {
  /** A server connected to nothing that no client has initialized. */
  take(): Server;
  /**
   * Hands a server back after its request. `clean`: the exchange ended with
   * the server's answer to every request in it, and the server was closed.
   */
  give(server: Server, clean: boolean): void;
}

export class IdleServers implements ServerLender {
  readonly #idle: Server[] = [];

  constructor(
    private readonly make: () => Server,
    private readonly maxIdle = MAX_IDLE_SERVERS,
  ) {}

  take(): Server {
    return this.#idle.pop() ?? this.make();
  }

  give(server: Server, clean: boolean): void {
    if (!reusable(server, clean) || this.#idle.length >= this.maxIdle || this.#idle.includes(server)) return;
    this.#idle.push(server);
  }

  /** Servers waiting to be lent. */
  get idle(): number {
    return this.#idle.length;
  }
}

/** Pure: whether a server handed back may serve another request. */
export function reusable(server: Pick<Server, 'transport' | 'getClientCapabilities' | 'getClientVersion'>, clean: boolean): boolean {
  return clean && server.transport === undefined && server.getClientCapabilities() === undefined && server.getClientVersion() === undefined;
}
