/**
 * `callbridge/server`: the local implementation of the call-tracing service on SQLite
 * (SPEC §1, §2). `startServer` opens the database, builds the app and listens.
 */
import { describe, InvalidOptionError, rejectUnknownOptions } from '../errors.js';
import { MAX_TIMER_MS } from '../timers.js';
import { buildApp } from './app.js';
import type { ServerUser } from './context.js';
import { closeDatabase, openDatabase, optimizeDatabase } from './store/db.js';
import { startWalCheckpoints } from './store/wal-checkpoints.js';
import { DEFAULT_MAX_CONCURRENT_STREAMS } from './store/readers.js';
import { defaultSqliteDriver, SQLITE_DRIVERS, type SqliteDriver } from './store/sqlite.js';

export type { ServerUser } from './context.js';
export type { SqliteDriver } from './store/sqlite.js';

export interface ServerOptions {
  /**
   * TCP port; 0 picks a free one (read it from `url`).
   * @default 6345
   */
  readonly port?: number;
  /**
   * Interface to listen on. The default keeps the server off the network.
   * @default '127.0.0.1'
   */
  readonly host?: string;
  /**
   * SQLite file, created when absent; `':memory:'` keeps everything in memory.
   * @default 'callbridge.db'
   */
  readonly dbPath?: string;
  /**
   * Users allowed in, each with the entities it may use (`['*']` = all). At least one is required
   * (there is no built-in user).
   */
  readonly users?: readonly ServerUser[];
  /**
   * Put every project in complete mode: v1 call writes answer 400 `CALLS_COMPLETE_MODE_REQUIRED`
   * and calls must go through `/v2/{entity}/{project}/calls/complete`.
   * @default false
   */
  readonly completeMode?: boolean;
  /**
   * Largest request body; larger ones get 413.
   * @default 33554432 (32 MiB)
   */
  readonly maxBodyBytes?: number;
  /**
   * Log requests and internal errors (Fastify's pino logger, JSON lines on stdout).
   * @default false
   */
  readonly logger?: boolean;
  /**
   * Most `calls/stream_query` answers streamed at once. Each holds a read connection and a WAL
   * snapshot while its client reads; past this a query answers 503 with `Retry-After: 1`.
   * @default 16
   */
  readonly maxConcurrentStreams?: number;
  /**
   * Longest a connection may go without a byte moving either way; then it is closed. A client
   * that stops reading a `calls/stream_query` answer loses its stream (and the WAL snapshot it
   * holds) after this.
   * @default 60000
   */
  readonly idleTimeoutMs?: number;
  /**
   * Longest a request may take to arrive, headers and body; slower ones get 408. Without it a
   * client trickling a body would hold its connection for good.
   * @default 120000
   */
  readonly requestTimeoutMs?: number;
  /**
   * The SQLite driver: `'better-sqlite3'` (what the SPEC figures are measured with) or Node's own
   * `'node:sqlite'` (Node >= 22.16; better-sqlite3 12 aborts Node 24 processes).
   * @default env `CALLBRIDGE_SQLITE_DRIVER`, else better-sqlite3 on Node < 24 (node:sqlite where it
   * did not install) and node:sqlite on Node >= 24
   */
  readonly sqliteDriver?: SqliteDriver;
}

export interface RunningServer {
  /** `http://<host>:<port>` with the port actually bound. */
  readonly url: string;
  /**
   * Stop accepting, let in-flight requests finish (for up to CLOSE_GRACE_MS, after which their
   * connections are closed), close the database. Idempotent.
   */
  close(): Promise<void>;
}

export const DEFAULT_PORT = 6345;
export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_DB_PATH = 'callbridge.db';
export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;
/** See `ServerOptions.idleTimeoutMs`. */
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
/** See `ServerOptions.requestTimeoutMs`: 32 MiB at 2 Mbit/s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;

/** How often the planner statistics are refreshed while the server runs. */
const OPTIMIZE_INTERVAL_MS = 60 * 60 * 1000;

/**
 * Start the local server and resolve once it accepts requests.
 *
 * @example
 * const server = await startServer({ port: 0, dbPath: ':memory:', users: [{ username: 'dev', password: 'pw', entities: ['*'] }] });
 * console.log(server.url); // http://127.0.0.1:54321
 * await server.close();
 */
export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('options', 'an object', options);
  }
  rejectUnknownOptions(options, SERVER_OPTION_KEYS);
  const port = options.port ?? DEFAULT_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidOptionError('port', 'an integer from 0 to 65535', port);
  const host = nonEmptyText('host', options.host, DEFAULT_HOST);
  const dbPath = nonEmptyText('dbPath', options.dbPath, DEFAULT_DB_PATH);
  const maxBodyBytes = positiveInteger('maxBodyBytes', options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES);
  const maxConcurrentStreams = positiveInteger('maxConcurrentStreams', options.maxConcurrentStreams, DEFAULT_MAX_CONCURRENT_STREAMS);
  const idleTimeoutMs = timeoutMs('idleTimeoutMs', options.idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS);
  const requestTimeoutMs = timeoutMs('requestTimeoutMs', options.requestTimeoutMs, DEFAULT_REQUEST_TIMEOUT_MS);
  const completeMode = optionalBoolean('completeMode', options.completeMode);
  const logger = optionalBoolean('logger', options.logger);
  validateUsers(options.users);
  const sqliteDriver = options.sqliteDriver ?? defaultSqliteDriver();
  if (!SQLITE_DRIVERS.includes(sqliteDriver)) {
    throw new InvalidOptionError('sqliteDriver', `one of ${SQLITE_DRIVERS.map((name) => `'${name}'`).join(', ')}`, sqliteDriver);
  }

  const db = openDatabase(dbPath, sqliteDriver);
  const app = buildApp({
    db,
    users: options.users ?? [],
    completeMode,
    maxBodyBytes,
    logger,
    maxConcurrentStreams,
    idleTimeoutMs,
    requestTimeoutMs,
  });
  try {
    await app.listen({ port, host });
  } catch (error) {
    await app.close().catch(() => {});
    db.close();
    throw error;
  }
  const address = app.server.address();
  const boundPort = typeof address === 'object' && address !== null ? address.port : port;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  // Statistics follow the data as it grows (see optimizeDatabase); the timer never keeps the
  // process alive.
  const optimizer = setInterval(() => {
    if (db.open) optimizeDatabase(db);
  }, OPTIMIZE_INTERVAL_MS);
  optimizer.unref();
  const stopCheckpoints = startWalCheckpoints(db);

  let closing: Promise<void> | null = null;
  return {
    url: `http://${urlHost}:${boundPort}`,
    close() {
      clearInterval(optimizer);
      closing ??= closeWithin(app, CLOSE_GRACE_MS).finally(async () => {
        // The worker's connection first, so the closing checkpoint has the WAL to itself.
        await stopCheckpoints();
        // After the last request: SQLite calls are synchronous, so none is mid-flight.
        if (db.open) {
          optimizeDatabase(db);
          closeDatabase(db);
        }
      });
      return closing;
    },
  };
}

/**
 * How long `close()` lets requests in flight finish before it closes their connections: a client
 * that trickles a body or stops reading a stream would otherwise keep the server from closing
 * (and `callbridge serve` from exiting on SIGTERM) for as long as it likes.
 */
export const CLOSE_GRACE_MS = 5000;

/** `app.close()`, with the connections still open after `graceMs` closed. */
async function closeWithin(app: ReturnType<typeof buildApp>, graceMs: number): Promise<void> {
  const deadline = setTimeout(() => app.server.closeAllConnections(), graceMs);
  try {
    await app.close();
  } finally {
    clearTimeout(deadline);
  }
}

/** Every option of `startServer`, once (the compiler checks the list against `ServerOptions`). */
const SERVER_OPTION_KEYS = Object.keys({
  port: true, host: true, dbPath: true, users: true, completeMode: true, maxBodyBytes: true, logger: true,
  maxConcurrentStreams: true, sqliteDriver: true, idleTimeoutMs: true, requestTimeoutMs: true,
} satisfies Record<keyof ServerOptions, true>);

function nonEmptyText(name: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value === '') throw new InvalidOptionError(name, 'a non-empty string', value);
  return value;
}

function positiveInteger(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || (value as number) < 1) throw new InvalidOptionError(name, 'a positive integer', value);
  return value as number;
}

/** A timeout in milliseconds: at most what a Node timer takes. */
function timeoutMs(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_TIMER_MS) {
    throw new InvalidOptionError(name, `an integer from 1 to ${MAX_TIMER_MS}`, value);
  }
  return value as number;
}

function optionalBoolean(name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new InvalidOptionError(name, 'a boolean', value);
  return value;
}

/** At least one well-formed user: a server no one may use would answer every request 401. */
function validateUsers(users: readonly ServerUser[] | undefined): void {
  if (!Array.isArray(users) || users.length === 0) {
    throw new TypeError(
      "Expected `users` to list at least one { username, password, entities } (entities ['*'] for all): there is no built-in user, and without one every request answers 401",
    );
  }
  for (const user of users) validateUser(user);
}

function validateUser(user: ServerUser): void {
  if (typeof user !== 'object' || user === null) {
    throw new TypeError(`Expected each of \`users\` to be { username, password, entities }, got ${describe(user)}`);
  }
  if (typeof user.username !== 'string' || user.username === '' || user.username.includes(':')) {
    throw new TypeError(`Expected a user's \`username\` to be a non-empty string without ":", got ${describe(user.username)}`);
  }
  if (typeof user.password !== 'string') {
    throw new TypeError(`Expected the \`password\` of user ${JSON.stringify(user.username)} to be a string`);
  }
  if (!Array.isArray(user.entities) || user.entities.some((e) => typeof e !== 'string' || e === '')) {
    throw new TypeError(`Expected the \`entities\` of user ${JSON.stringify(user.username)} to be a list of entity names or ['*']`);
  }
}
