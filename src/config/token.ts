/**
 * Reads the HTTP bearer token file at start-up and refuses anything that is
 * not a private, user-owned file holding a long URL-safe random secret.
 * Refusals never quote the file's contents.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { ConfigError } from './errors.js';
import { errCode, sharedMode } from '../util/errno.js';

const MIN_TOKEN_LENGTH = 32;
/** A token is one line; anything larger is not a token file. */
const MAX_TOKEN_FILE_BYTES = 4096;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]*$/;

/** How to make a valid file; appended to every refusal. */
function tokenHint(path: string): string {
  return (
    `Create one with: umask 077; node -p "require('crypto').randomBytes(32).toString('base64url')" > ${path}` +
    ' (a private file owned by the service user holding at least 32 characters of A-Z a-z 0-9 _ -).'
  );
}

function refuse(path: string, why: string): ConfigError {
  return new ConfigError('config_invalid', `"tokenFile" ${JSON.stringify(path)} ${why}. ${tokenHint(path)}`, 'tokenFile');
}

/**
 * Returns the token. Checks run on the opened descriptor, so the file that
 * was checked is the file that was read.
 */
export async function readTokenFile(path: string, uid: number = currentUid()): Promise<string> {
  let handle;
  try {
    // O_NONBLOCK: a FIFO in its place must not hang start-up.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const code = errCode(err);
    throw refuse(path, code === 'ENOENT' ? 'does not exist' : `cannot be opened (${code ?? 'unknown error'})`);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw refuse(path, 'is not a regular file');
    if (info.uid !== uid) throw refuse(path, `is owned by uid ${info.uid}, not by the service user (uid ${uid})`);
    const octal = sharedMode(info.mode);
    if (octal !== undefined) {
      throw refuse(path, `is accessible by group/other (mode ${octal}); run chmod 600 ${path} or make a new one`);
    }
    if (info.size > MAX_TOKEN_FILE_BYTES) throw refuse(path, `is ${info.size} bytes, too large for a token file`);
    const text = (await handle.readFile({ encoding: 'utf8' })).replace(/\n$/, '');
    if (!TOKEN_SHAPE.test(text)) throw refuse(path, 'must hold only URL-safe characters (A-Z a-z 0-9 _ -) on one line');
    if (text.length < MIN_TOKEN_LENGTH) throw refuse(path, `holds ${text.length} characters; at least ${MIN_TOKEN_LENGTH} are required`);
    return text;
  } finally {
    await handle.close();
  }
}

function currentUid(): number {
  // The loader only accepts Linux and macOS, where getuid exists.
  return process.getuid?.() ?? -1;
}
