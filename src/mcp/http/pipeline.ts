/**
 * The request pipeline of the HTTP transport. Guards run in a fixed order,
 * each before anything costlier: route and method, bearer token, Host and
 * Origin, size, JSON, JSON-RPC envelope, the Streamable HTTP rules (Accept,
 * Content-Type, protocol version, batches: exchange.ts), and only then MCP.
 * Nothing reaches a tool (or reads a body) without the right token.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { AuthVerdict } from './auth.js';
import { declaredTooLarge, readBody } from './body.js';
import { parseEnvelope } from './envelope.js';
import type { HostAllowlist } from './host-allowlist.js';
import type { ServerLender } from './idle-servers.js';
import { exchange } from './exchange.js';
import { ExchangeEnd } from './exchange-end.js';
import { pollRound } from './poll-round.js';
import { answer, internalError, refuse, type Refusal } from './listener-answers.js';
import type { Log } from '../../util/logger.js';

export const MCP_PATH = '/mcp';

export type HttpLog = Log;

export interface PipelineLimits {
  maxBodyBytes: number;
  /** From the request's arrival until its body is fully read. */
  bodyTimeoutMs: number;
  /** From a validated request until MCP has answered; above the 60 s wait cap. */
  responseTimeoutMs: number;
}

export interface PipelineOptions {
  authorize(authorization: string | undefined): AuthVerdict;
  hosts: HostAllowlist;
  limits: PipelineLimits;
  /** The MCP servers lent to one exchange for its duration (stateless: nothing carries over). */
  servers: ServerLender;
  /** The endpoint URL handlers see in their request info. */
  endpoint: string;
  log: HttpLog;
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse, expectContinue?: boolean) => void;

const REFUSALS = {
  notFound: { status: 404, code: -32000, message: `Not Found: the only endpoint is POST ${MCP_PATH}` },
  method: { status: 405, code: -32000, message: `Method Not Allowed: use POST ${MCP_PATH}`, headers: { Allow: 'POST' } },
  // Query strings are refused outright, so a token placed there is never even looked at.
  query: { status: 400, code: -32000, message: 'Bad Request: no query string is accepted; send the token as "Authorization: Bearer <token>"' },
  missingToken: {
    status: 401,
    code: -32000,
    message: 'Unauthorized: send "Authorization: Bearer <token>"',
    headers: { 'WWW-Authenticate': 'Bearer realm="droid-mcp"' },
  },
  badToken: {
    status: 401,
    code: -32000,
    message: 'Unauthorized: the bearer token is not valid',
    headers: { 'WWW-Authenticate': 'Bearer realm="droid-mcp", error="invalid_token"' },
  },
  host: { status: 403, code: -32000, message: 'Forbidden: the Host header does not name this server' },
  origin: { status: 403, code: -32000, message: 'Forbidden: requests from this Origin are not accepted' },
  tooLarge: { status: 413, code: -32000, message: 'Payload Too Large: the body limit is 1 MiB' },
  slowBody: { status: 408, code: -32000, message: 'Request Timeout: the body did not arrive in time' },
} satisfies Record<string, Refusal>;

/** Whether the request announces a body (and so may leave unread bytes behind). */
function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export function createPipeline(options: PipelineOptions): RequestHandler {
  const { log, limits } = options;
  const tooLarge: Refusal = { ...REFUSALS.tooLarge, message: `Payload Too Large: the body limit is ${limits.maxBodyBytes} bytes` };
  const endOfPoll = pollRound();

  async function handle(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): Promise<void> {
    const target = req.url ?? '';
    const q = target.indexOf('?');
    // Only the path is ever logged: a query string may hold a token.
    const path = (q < 0 ? target : target.slice(0, q)).slice(0, 200);
    const refused = (refusal: Refusal, reason: string, bodyPending = announcesBody(req)) => {
      log.info({ status: refusal.status, reason, method: req.method, path }, 'http request refused');
      refuse(req, res, refusal, bodyPending);
    };

    if (path !== MCP_PATH) return refused(REFUSALS.notFound, 'route');
    if (req.method !== 'POST') return refused(REFUSALS.method, 'method');
    if (q >= 0) return refused(REFUSALS.query, 'query_string');

    const verdict = options.authorize(req.headers.authorization);
    if (verdict !== 'ok') return refused(verdict === 'missing' ? REFUSALS.missingToken : REFUSALS.badToken, `token_${verdict}`);

    if (!options.hosts.hostAllowed(req.headers.host)) return refused(REFUSALS.host, 'host');
    if (!options.hosts.originAllowed(req.headers.origin)) return refused(REFUSALS.origin, 'origin');

    if (declaredTooLarge(req, limits.maxBodyBytes)) return refused(tooLarge, 'body_too_large');
    if (expectContinue) res.writeContinue();
    const body = await readBody(req, { maxBytes: limits.maxBodyBytes, deadlineMs: limits.bodyTimeoutMs });
    if (body.kind === 'too_large') return refused(tooLarge, 'body_too_large', true);
    if (body.kind === 'timeout') return refused(REFUSALS.slowBody, 'body_timeout', true);
    if (body.kind === 'aborted') {
      req.socket.destroy();
      return;
    }

    const envelope = parseEnvelope(body.body);
    if (!envelope.ok) {
      const reason = envelope.code === -32700 ? 'invalid_json' : 'invalid_envelope';
      return refused({ status: 400, code: envelope.code, message: envelope.message }, reason, false);
    }

    await answerExchange(options, endOfPoll, { req, res, path, messages: envelope.messages, refused });
  }

  return (req, res, expectContinue = false) => {
    handle(req, res, expectContinue).catch((err: unknown) => {
      // A guard itself failed: still never more than the generic answer.
      log.error({ err }, 'http request handling failed unexpectedly');
      refuse(req, res, internalError(), !req.complete);
    });
  };
}

interface Exchanging {
  req: IncomingMessage;
  res: ServerResponse;
  /** The request's path, the only part of its target ever logged. */
  path: string;
  messages: JSONRPCMessage | JSONRPCMessage[];
  refused: (refusal: Refusal, reason: string, bodyPending?: boolean) => void;
}

/** Past every guard: the messages go to an SDK server of their own, within the response deadline, unless the client left. */
async function answerExchange(options: PipelineOptions, endOfPoll: () => Promise<void>, exchanging: Exchanging): Promise<void> {
  const { req, res, path, messages, refused } = exchanging;
  const { log, limits } = options;
  const end = new ExchangeEnd();
  const deadline = setTimeout(() => end.end(new Error(`no MCP response within ${limits.responseTimeoutMs} ms`)), limits.responseTimeoutMs);
  const onClose = () => {
    if (!res.writableFinished) end.end(new ClientGone());
  };
  res.once('close', onClose);
  try {
    // With the requests read in the same poll (poll-round.ts). A client that left
    // meanwhile gets nothing run for it: a reset read in that poll has destroyed
    // the socket already, though its 'close' comes only after this check phase.
    await endOfPoll();
    if (req.socket.destroyed) end.end(new ClientGone());
    if (end.reason !== undefined) throw end.reason;
    const outcome = await exchange(options.servers, { url: options.endpoint, headers: req.headers, messages, end });
    if (outcome.kind === 'refused') return refused(outcome.refusal, outcome.reason, false);
    if (outcome.kind === 'accepted') answer(res, 202);
    else answer(res, 200, outcome.body);
  } catch (err) {
    if (err instanceof ClientGone) {
      log.info({ path }, 'http client went away before the MCP response');
      return;
    }
    log.error({ err }, 'MCP request failed unexpectedly');
    refuse(req, res, internalError(), false);
  } finally {
    clearTimeout(deadline);
    res.off('close', onClose);
  }
}

class ClientGone extends Error {
  constructor() {
    super('the HTTP client closed the connection');
  }
}
