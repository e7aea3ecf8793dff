/**
 * HTTP Basic authentication and project authorization (SPEC §2.5).
 *
 * Credentials are compared as SHA-256 digests with `crypto.timingSafeEqual`: digests have one
 * length, so neither the content nor the length of a guess leaks through timing, and every
 * configured user is compared on every request (no early exit on the first match).
 */
import { isUtf8 } from 'node:buffer';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ServerUser } from './context.js';
import { BadRequestError, HttpError } from './errors.js';
import { quote } from './quote.js';

/** Checks an `Authorization` header; returns the matching user or null. */
export type Authenticator = (authorization: string | undefined) => ServerUser | null;

interface HashedUser {
  readonly user: ServerUser;
  readonly usernameHash: Buffer;
  readonly passwordHash: Buffer;
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * Build the credential check for a fixed list of users.
 *
 * @example
 * const authenticate = createAuthenticator([{ username: 'dev', password: 'pw', entities: ['*'] }]);
 * authenticate('Basic ZGV2OnB3')?.username; // 'dev'
 */
export function createAuthenticator(users: readonly ServerUser[]): Authenticator {
  const hashed: HashedUser[] = users.map((user) => ({
    user,
    usernameHash: sha256(user.username),
    passwordHash: sha256(user.password),
  }));
  return (authorization) => {
    const credentials = parseBasic(authorization);
    if (credentials === null) return null;
    const usernameHash = sha256(credentials.username);
    const passwordHash = sha256(credentials.password);
    let match: ServerUser | null = null;
    for (const candidate of hashed) {
      // `&` not `&&`: both comparisons run whatever the first one says.
      const same =
        Number(timingSafeEqual(usernameHash, candidate.usernameHash)) &
        Number(timingSafeEqual(passwordHash, candidate.passwordHash));
      if (same === 1 && match === null) match = candidate.user;
    }
    return match;
  };
}

function parseBasic(authorization: string | undefined): { username: string; password: string } | null {
  if (authorization === undefined) return null;
  const match = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(authorization);
  if (match === null) return null;
  const token = match[1] as string;
  const bytes = Buffer.from(token, 'base64');
  // Node's decoder stops at the first `=` and skips what it cannot read; only the canonical
  // (RFC 4648, padded) spelling of the credentials is taken, as Python's b64decode requires padding.
  if (bytes.toString('base64') !== token) return null;
  // Credentials that are not UTF-8 match no one: decoded leniently, two different byte sequences
  // would both read as the same password with U+FFFD in it.
  if (!isUtf8(bytes)) return null;
  const decoded = bytes.toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

const PROJECT_ID = /^([^/\s]+)\/([^/\s]+)$/;

/**
 * Check that `projectId` is `entity/project` and that `user` is granted the entity (`*` grants
 * every entity). Returns the entity. Throws 400 for a malformed id, 403 for an entity not granted.
 */
export function authorizeUserForProject(user: ServerUser, projectId: unknown): string {
  if (typeof projectId !== 'string') throw new BadRequestError('project_id must be a string "entity/project"');
  const match = PROJECT_ID.exec(projectId);
  if (match === null) {
    throw new BadRequestError(`Invalid project_id ${quote(projectId)}: expected "entity/project"`);
  }
  const entity = match[1] as string;
  if (!user.entities.includes('*') && !user.entities.includes(entity)) throw new HttpError(403, 'Forbidden');
  return entity;
}
