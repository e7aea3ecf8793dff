/**
 * Shared checks of the reliability suite: the host process hears no exception, the database is
 * read straight from its file (digests, rows per id, integrity), and every error body the suite
 * provokes is scanned for internals (stack frames, SQL, file paths).
 */
import { createHash } from 'node:crypto';
import { openSqlite, type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { firstColumn } from '../helpers/sqlite.js';
import { expect } from 'vitest';
import { post, type Credentials } from '../helpers/server.js';

/**
 * Listen for `uncaughtException` and `unhandledRejection` on the process: the exporter must never
 * let one reach its host (SPEC §4.12). `assertNone()` fails the test naming what escaped.
 */
export function watchHostProcess(): { assertNone(): void; dispose(): void } {
  const escaped: string[] = [];
  const onException = (error: unknown): void => {
    escaped.push(`uncaughtException: ${String(error)}`);
  };
  const onRejection = (reason: unknown): void => {
    escaped.push(`unhandledRejection: ${String(reason)}`);
  };
  process.on('uncaughtException', onException);
  process.on('unhandledRejection', onRejection);
  return {
    assertNone: () => expect(escaped).toEqual([]),
    dispose: () => {
      process.off('uncaughtException', onException);
      process.off('unhandledRejection', onRejection);
    },
  };
}

/** Open a server's database file read-only (WAL: readers never block the server's writer). */
export function openReadOnly(dbPath: string): SqliteDatabase {
  return openSqlite(dbPath, { readonly: true, fileMustExist: true });
}

/**
 * SHA-256 over every row of every table, in rowid order: equal digests mean the request that came
 * between the two readings changed nothing.
 */
export function databaseDigest(dbPath: string): string {
  const db = openReadOnly(dbPath);
  try {
    const hash = createHash('sha256');
    const tables = firstColumn(
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all(),
    ) as string[];
    for (const table of tables) {
      hash.update(`\u0000table ${table}\u0000`);
      // Table names come from sqlite_master itself, quoted as identifiers.
      for (const row of db.prepare(`SELECT * FROM "${table.replaceAll('"', '""')}" ORDER BY rowid`).iterate()) {
        const values = Object.values(row as Record<string, unknown>);
        hash.update(JSON.stringify(values, (_key, value: unknown) => (value instanceof Uint8Array ? Buffer.from(value).toString('base64') : value)));
      }
    }
    return hash.digest('hex');
  } finally {
    db.close();
  }
}

/** `id -> number of rows` of one project's calls, straight from the table (the unique index is not trusted). */
export function rowsPerCallId(dbPath: string, projectId: string): Map<string, number> {
  const db = openReadOnly(dbPath);
  try {
    const rows = db.prepare('SELECT id, count(*) AS n FROM calls WHERE project_id = ? GROUP BY id').all(projectId) as Array<{
      id: string;
      n: number;
    }>;
    return new Map(rows.map((row) => [row.id, row.n]));
  } finally {
    db.close();
  }
}

/** `PRAGMA integrity_check` of a closed database file: `['ok']` when intact. */
export function integrityCheck(dbPath: string): string[] {
  const db = openSqlite(dbPath, { fileMustExist: true });
  try {
    const rows = db.pragma('integrity_check', { simple: false }) as Array<{ integrity_check: unknown }>;
    return rows.map((row) => String(row.integrity_check));
  } finally {
    db.close();
  }
}

/**
 * What an error body must never show: a stack frame, a source location, a path on this machine,
 * SQL text or the database engine's name. Matched after removing every string the request itself
 * carried (a 422 echoes its `input`, a 400 quotes the bad value: the suite's own hostile strings
 * contain SQL on purpose).
 */
const INTERNALS: ReadonlyArray<[string, RegExp]> = [
  ['a stack frame', /(^|\n|\s)at (async )?[\w$.<>[\]]+ \(|\n\s+at |\bat [^\s]+:\d+:\d+/],
  ['a source location', /\.(ts|js|mjs|cjs):\d+/],
  ['a path on this machine', /\/work\/|\/tmp\/|\/home\/|node_modules/],
  ['SQL text', /\bSELECT\b|\bINSERT INTO\b|\bUPDATE \w+ SET\b|\bDELETE FROM\b|\bWHERE\b/],
  ['the database engine', /sqlite/i],
];

/** Every string inside a JSON value (keys too), longest first. */
function stringsOf(value: unknown, into: Set<string> = new Set()): Set<string> {
  if (typeof value === 'string') into.add(value);
  else if (Array.isArray(value)) for (const item of value) stringsOf(item, into);
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      into.add(key);
      stringsOf(item, into);
    }
  }
  return into;
}

/** Fail when an error body (status >= 400) shows internals not taken from the request. */
export function expectCleanErrorBody(status: number, text: string, request: unknown): void {
  if (status < 400) return;
  let scrubbed = text;
  const echoed = [...stringsOf(typeof request === 'string' ? safeParse(request) ?? request : request)]
    .filter((piece) => piece.length >= 2)
    .flatMap((piece) => [JSON.stringify(piece).slice(1, -1), piece])
    .sort((a, b) => b.length - a.length);
  for (const piece of echoed) scrubbed = scrubbed.split(piece).join('');
  for (const [what, pattern] of INTERNALS) {
    expect(pattern.test(scrubbed), `error body (${status}) shows ${what}: ${text.slice(0, 500)}`).toBe(false);
  }
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Expect a refusal the client can act on: a 4xx (never a 500) whose body says why, as SPEC §2.5
 * writes it (`reason` text, or a 422 `detail` list with `loc` and `msg`).
 */
export function expectClearRefusal(response: { status: number; body: unknown; text: string }): void {
  expect(response.status, response.text.slice(0, 300)).toBeGreaterThanOrEqual(400);
  expect(response.status, response.text.slice(0, 300)).toBeLessThan(500);
  const body = response.body as { reason?: unknown; detail?: unknown } | null;
  expect(body !== null && typeof body === 'object', `not a JSON error body: ${response.text.slice(0, 300)}`).toBe(true);
  if (Array.isArray(body?.detail)) {
    expect(body.detail.length).toBeGreaterThan(0);
    for (const issue of body.detail as Array<{ loc?: unknown; msg?: unknown }>) {
      expect(Array.isArray(issue.loc) && issue.loc[0] === 'body').toBe(true);
      expect(typeof issue.msg === 'string' && issue.msg !== '').toBe(true);
    }
  } else {
    expect(typeof body?.reason === 'string' && body.reason !== '', `no reason: ${response.text.slice(0, 300)}`).toBe(true);
  }
}

/** `post` from the shared helpers, with every error body scanned for internals. */
export async function postScanned(
  url: string,
  path: string,
  body: unknown,
  credentials?: Credentials,
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const response = await post(url, path, body, credentials);
  expectCleanErrorBody(response.status, response.text, body);
  return response;
}
