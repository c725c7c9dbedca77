/** The `code` of a Node system error (ENOENT, ELOCKED, …), if it has one. */
export function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

/**
 * The octal mode (e.g. "755") when group or others have any access, else
 * undefined. State, tokens and results must be private to the service user.
 */
export function sharedMode(mode: number): string | undefined {
  return (mode & 0o077) === 0 ? undefined : (mode & 0o777).toString(8).padStart(3, '0');
}
