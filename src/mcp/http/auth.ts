/**
 * Bearer authentication for the HTTP transport. Both sides are hashed before
 * the constant-time comparison, so neither a token's content nor its length
 * shows in the timing.
 */
import * as crypto from 'node:crypto';

export type AuthVerdict = 'ok' | 'missing' | 'invalid';

/** `Bearer <token>`; the scheme is case-insensitive (RFC 7235), the token is not. */
const BEARER = /^bearer +(\S+)$/i;

/** Node's one-shot hash where it has one (20.12 and later): a hash object per request cost more than the hash. */
const oneShot: typeof crypto.hash | undefined = typeof crypto.hash === 'function' ? crypto.hash : undefined;

function digest(value: string): Buffer {
  return oneShot ? oneShot('sha256', value, 'buffer') : crypto.createHash('sha256').update(value, 'utf8').digest();
}

/** Builds the check for one expected token; the token itself is not kept. */
export function bearerAuth(token: string): (authorization: string | undefined) => AuthVerdict {
  const expected = digest(token);
  return (authorization) => {
    if (authorization === undefined || authorization === '') return 'missing';
    const presented = BEARER.exec(authorization)?.[1];
    // Malformed headers still pay for a hash and a comparison: every refusal costs the same.
    const match = crypto.timingSafeEqual(digest(presented ?? authorization), expected);
    return match && presented !== undefined ? 'ok' : 'invalid';
  };
}
