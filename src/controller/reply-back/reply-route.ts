/**
 * Reply routes: which Amp conversation a session reports to, and which reply
 * handles are still good. Pure.
 *
 * A route is the pair (replyTo, routeId). Every accepted change of recipient
 * (a retarget to another conversation, or a detach) starts a new route with a
 * fresh id, so every handle proven under an older route is dead for good,
 * even if the turn that changed the route is later cancelled and even if the
 * session is later routed back to the same conversation.
 */
import type { RunRecord, RunReply, SessionRecord } from '../../shared/records.js';

/** An Amp conversation (thread) id: `T-` followed by a lowercase UUID. */
export const CONVERSATION_ID = /^T-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isConversationId(value: unknown): value is string {
  return typeof value === 'string' && CONVERSATION_ID.test(value);
}

export interface Route {
  replyTo: string | null;
  /** Null exactly when replyTo is null. */
  routeId: string | null;
}

/**
 * What a request asks of the route: `undefined` keeps it (an omitted
 * replyTo), a conversation id routes to it, null detaches.
 */
export type RouteRequest = string | null | undefined;

/**
 * The route after an accepted request. Asking for the current recipient
 * keeps the route (and its handles); anything else starts a new one.
 */
export function nextRoute(current: Route, request: RouteRequest, newRouteId: () => string): { route: Route; changed: boolean } {
  if (request === undefined || request === current.replyTo) return { route: current, changed: false };
  if (request === null) return { route: { replyTo: null, routeId: null }, changed: true };
  return { route: { replyTo: request, routeId: newRouteId() }, changed: true };
}

/** The handles usable on `routeId`: returned to approved own-route sends while it was the route. */
export function provenHandles(runs: readonly Pick<RunRecord, 'reply'>[], routeId: string | null): Set<string> {
  const handles = new Set<string>();
  if (routeId === null) return handles;
  for (const run of runs) {
    for (const h of run.reply?.handles ?? []) if (h.routeId === routeId) handles.add(h.handle);
  }
  return handles;
}

export function routeOf(session: Pick<SessionRecord, 'replyTo' | 'replyRouteId'>): Route {
  return { replyTo: session.replyTo, routeId: session.replyRouteId ?? null };
}

/**
 * The run's reply record for `route`: kept while the route is the one it
 * already has, fresh (nothing accepted, no handles) on a new route, absent
 * when detached.
 */
export function withReply(run: RunRecord, route: Route): RunRecord {
  if (route.routeId === null) {
    const { reply: _dropped, ...detached } = run;
    return detached;
  }
  if (run.reply?.routeId === route.routeId) return run;
  const reply: RunReply = { routeId: route.routeId, accepted: 0, handles: [], failure: null };
  return { ...run, reply };
}
