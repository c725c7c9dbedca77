/**
 * Bearer authentication for the HTTP transport. Both sides are hashed before
 * the constant-time comparison, so neither a token's content nor its length
 * shows in the timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export type AuthVerdict = 'ok' | 'missing' | 'invalid';

/** `Bearer <token>`; the scheme is case-insensitive (RFC 7235), the token is not. */
const BEARER = /^bearer +(\S+)$/i;

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Builds the check for one expected token; the token itself is not kept. */
export function bearerAuth(token: string): (authorization: string | undefined) => AuthVerdict {
  const expected = digest(token);
  return (authorization) => {
    if (authorization === undefined || authorization === '') return 'missing';
    const presented = BEARER.exec(authorization)?.[1];
    // Malformed headers still pay for a hash and a comparison: every refusal costs the same.
    const match = timingSafeEqual(digest(presented ?? authorization), expected);
    return match && presented !== undefined ? 'ok' : 'invalid';
  };
}
