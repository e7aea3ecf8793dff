/**
 * Credential checks take constant time per comparison (SPEC §2.5), checked by inspection rather
 * than by timing (a shared machine makes timings noise): every check goes through
 * `crypto.timingSafeEqual` on two digests of one fixed length, for every configured user, whatever
 * the guess looks like (short, long, right user, wrong user, right password).
 */
import { describe, expect, it, vi } from 'vitest';

const comparisons = vi.hoisted(() => [] as Array<[number, number]>);

vi.mock('node:crypto', async (importOriginal) => {
  const crypto = await importOriginal<typeof import('node:crypto')>();
  return {
    ...crypto,
    timingSafeEqual: (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
      comparisons.push([a.byteLength, b.byteLength]);
      return crypto.timingSafeEqual(a, b);
    },
  };
});

const { createAuthenticator } = await import('../../src/server/auth.js');

const USERS = [
  { username: 'dev', password: 'pw', entities: ['*'] },
  { username: 'alice', password: 'a much longer password than the others', entities: ['acme'] },
  { username: 'bob', password: 'b', entities: ['x'] },
];
const basic = (credentials: string): string => `Basic ${Buffer.from(credentials).toString('base64')}`;

describe('credential comparison', () => {
  it.each([
    ['the right credentials of the first user', 'dev:pw', 'dev'],
    ['the right credentials of the last user', 'bob:b', 'bob'],
    ['a wrong password of the right length', 'dev:px', null],
    ['an empty password', 'alice:', null],
    ['a very long guess', `alice:${'x'.repeat(10_000)}`, null],
    ['an unknown user with a known password', 'mallory:pw', null],
    ['a password of another user', 'dev:b', null],
  ])('compares equal-length digests with timingSafeEqual for every user: %s', (_name, credentials, expected) => {
    const authenticate = createAuthenticator(USERS);
    comparisons.length = 0;
    expect(authenticate(basic(credentials))?.username ?? null).toBe(expected);
    // Two comparisons (user name, password) per configured user, with no early exit on a match.
    expect(comparisons).toHaveLength(USERS.length * 2);
    for (const [left, right] of comparisons) expect([left, right]).toEqual([32, 32]);
  });
});
