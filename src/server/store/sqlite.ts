/**
 * The SQLite connection the server works with, from one of two drivers:
 *
 * - `better-sqlite3` (the default on Node < 24): what the figures in bench/README.md's "Results"
 *   are measured with.
 * - Node's own `node:sqlite` (the default on Node >= 24). better-sqlite3 12, the last major that
 *   runs on Node 20, aborts Node 24 processes (`Assertion failed: (env) != nullptr` in
 *   `Statement::~Statement`): Node 24's `node::ObjectWrap` destructor looks up the environment
 *   from the current context, and a garbage collection run from a V8 task has none. `node:sqlite`
 *   is part of Node, so it has no such mismatch and needs no native build.
 *
 * `CALLBRIDGE_SQLITE_DRIVER` picks one explicitly (tests run the whole server on both where the
 * runtime has both). Where better-sqlite3 is the default but did not install (its native build
 * failed) and the runtime has a usable `node:sqlite` (Node >= 22.16), that is used instead.
 *
 * The interface is the part of better-sqlite3's that the server uses, so a better-sqlite3
 * connection is used as it is (no wrapper on the ingest path); `node:sqlite` gets a thin wrapper
 * that keeps better-sqlite3's behaviour where the two differ: an array argument binds its items,
 * `undefined` binds NULL, unknown named parameters are ignored, `changes` is a number, an
 * iterator whose row fails closes, and `pragma()` / `transaction()` exist. One difference is left: node:sqlite binds NULL to a parameter
 * given no value, where better-sqlite3 throws. The server's statements get their values from its
 * own code, and the suite runs on both drivers, so a miscount fails under better-sqlite3.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

export type SqliteDriver = 'better-sqlite3' | 'node:sqlite';
export const SQLITE_DRIVERS: readonly SqliteDriver[] = ['better-sqlite3', 'node:sqlite'];

/** What `run()` reports. */
export interface SqliteRunResult {
  readonly changes: number;
  readonly lastInsertRowid: number | bigint;
}

/** Positional parameters as a list, or one object of named ones. */
type BindArguments<Params> = Params extends unknown[] ? Params : [Params];

/** A prepared statement; `Params` types what it binds, `Row` what it reads. */
export interface SqliteStatement<Params = unknown[], Row = unknown> {
  run(...params: BindArguments<Params>): SqliteRunResult;
  get(...params: BindArguments<Params>): Row | undefined;
  all(...params: BindArguments<Params>): Row[];
  iterate(...params: BindArguments<Params>): IterableIterator<Row>;
}

/** What {@link SqliteDatabase.transaction} returns: the transaction, run as BEGIN or BEGIN IMMEDIATE. */
export interface SqliteTransaction<Args extends unknown[], Result> {
  (...args: Args): Result;
  immediate(...args: Args): Result;
}

/** An open connection. */
export interface SqliteDatabase {
  /** The path it was opened with. */
  readonly name: string;
  readonly memory: boolean;
  readonly open: boolean;
  readonly inTransaction: boolean;
  prepare<Params = unknown[], Row = unknown>(sql: string): SqliteStatement<Params, Row>;
  exec(sql: string): unknown;
  /** `PRAGMA <source>`: its rows, or with `simple` the first column of the first row. */
  pragma(source: string, options?: { readonly simple?: boolean }): unknown;
  /**
   * `fn` as one transaction: BEGIN, then COMMIT when it returns or ROLLBACK when it throws; inside
   * another transaction, a savepoint. `.immediate(...)` begins with `BEGIN IMMEDIATE`: a
   * transaction that reads before it writes takes the write lock first, so a second process
   * writing the same file makes it wait (`timeout`) instead of failing with SQLITE_BUSY when
   * its read lock cannot be upgraded.
   */
  transaction<Args extends unknown[], Result>(fn: (...args: Args) => Result): SqliteTransaction<Args, Result>;
  /**
   * Registers a SQL function. An integer argument past 2^53 reaches `fn` as a bigint under
   * node:sqlite and as the nearest number under better-sqlite3; safe integers as numbers on both.
   */
  function(name: string, options: { readonly deterministic?: boolean }, fn: (...args: never[]) => unknown): unknown;
  close(): unknown;
}

export interface OpenSqliteOptions {
  /** @default false */
  readonly readonly?: boolean;
  /** Fail instead of creating the file. @default false */
  readonly fileMustExist?: boolean;
  /** How long a statement waits for another connection's lock, in ms. @default 5000 */
  readonly timeout?: number;
  /** Called with each statement's SQL as it runs (tests that check what ran). */
  readonly verbose?: (sql: string) => void;
  /** @default chosen by {@link defaultSqliteDriver} */
  readonly driver?: SqliteDriver;
}

const DEFAULT_TIMEOUT_MS = 5000;
/** This Node's major and minor version. */
const [NODE_MAJOR = 0, NODE_MINOR = 0] = process.versions.node.split('.').map(Number);
/** The first Node major on which better-sqlite3 12 aborts processes (see the module comment). */
const FIRST_NODE_MAJOR_WITHOUT_BETTER_SQLITE3 = 24;

/**
 * Open the database at `path` (`:memory:` for a throwaway one).
 *
 * @example
 * const db = openSqlite('callbridge.db');
 * db.prepare('SELECT 1 AS one').get(); // { one: 1 }
 */
export function openSqlite(path: string, options: OpenSqliteOptions = {}): SqliteDatabase {
  const driver = options.driver ?? defaultSqliteDriver();
  if (driver === 'node:sqlite') return new NodeSqliteDatabase(loadNodeSqlite(), path, options);
  const BetterSqlite3 = loadBetterSqlite3();
  if (BetterSqlite3 === undefined) throw missingBetterSqlite3();
  return new BetterSqlite3(path, {
    readonly: options.readonly ?? false,
    fileMustExist: options.fileMustExist ?? false,
    timeout: options.timeout ?? DEFAULT_TIMEOUT_MS,
    verbose: options.verbose === undefined ? undefined : (sql: unknown) => options.verbose?.(String(sql)),
  }) as unknown as SqliteDatabase;
}

/**
 * The driver {@link openSqlite} uses when not told: `CALLBRIDGE_SQLITE_DRIVER` when set, else
 * better-sqlite3 on Node < 24 where it is installed, else `node:sqlite`.
 */
export function defaultSqliteDriver(env: NodeJS.ProcessEnv = process.env): SqliteDriver {
  const chosen = env.CALLBRIDGE_SQLITE_DRIVER;
  if (chosen !== undefined && chosen !== '') {
    if (!(SQLITE_DRIVERS as readonly string[]).includes(chosen)) {
      throw new Error(`CALLBRIDGE_SQLITE_DRIVER must be one of ${SQLITE_DRIVERS.join(', ')}; received ${JSON.stringify(chosen)}`);
    }
    return chosen as SqliteDriver;
  }
  if (NODE_MAJOR >= FIRST_NODE_MAJOR_WITHOUT_BETTER_SQLITE3) return 'node:sqlite';
  if (loadBetterSqlite3() === undefined && nodeSqliteModule() !== undefined) return 'node:sqlite';
  return 'better-sqlite3';
}

/** The driver behind a connection {@link openSqlite} opened (a second connection uses the same). */
export function sqliteDriverOf(db: SqliteDatabase): SqliteDriver {
  return db instanceof NodeSqliteDatabase ? 'node:sqlite' : 'better-sqlite3';
}

/** Where `require` finds better-sqlite3 from here, or undefined when it is not installed. */
export function betterSqlite3Path(): string | undefined {
  try {
    return createRequire(import.meta.url).resolve('better-sqlite3');
  } catch {
    return undefined;
  }
}

type BetterSqlite3Constructor = new (path: string, options: object) => unknown;
/** better-sqlite3 once loaded, or why it could not be. */
let betterSqlite3: { readonly loaded: BetterSqlite3Constructor } | { readonly error: unknown } | undefined;

/** better-sqlite3, loaded on first use (never on Node 24 unless asked for); undefined when absent. */
function loadBetterSqlite3(): BetterSqlite3Constructor | undefined {
  if (betterSqlite3 === undefined) {
    try {
      betterSqlite3 = { loaded: createRequire(import.meta.url)('better-sqlite3') as BetterSqlite3Constructor };
    } catch (error) {
      betterSqlite3 = { error };
    }
  }
  return 'loaded' in betterSqlite3 ? betterSqlite3.loaded : undefined;
}

function missingBetterSqlite3(): Error {
  const cause = betterSqlite3 !== undefined && 'error' in betterSqlite3 ? betterSqlite3.error : undefined;
  const reason = cause instanceof Error ? cause.message.split('\n')[0] : String(cause);
  const fallback = nodeSqliteModule() === undefined ? '' : ', or set CALLBRIDGE_SQLITE_DRIVER=node:sqlite';
  return new Error(
    `The local server needs better-sqlite3 on Node ${process.versions.node}, and it did not load: ${reason}. ` +
      `Reinstall it (npm rebuild better-sqlite3; a build from source needs python3, make and g++)${fallback}`,
    { cause },
  );
}

/**
 * The part of `node:sqlite` used here, typed by hand: the @types/node of Node 20 (the oldest Node
 * this package supports) does not describe the module.
 */
interface DatabaseSync {
  readonly isOpen: boolean;
  readonly isTransaction: boolean;
  prepare(sql: string): StatementSync;
  exec(sql: string): void;
  function(name: string, options: { deterministic: boolean; useBigIntArguments: boolean }, fn: (...args: never[]) => unknown): void;
  close(): void;
}

interface StatementSync {
  run(...params: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
  setAllowUnknownNamedParameters(enabled: boolean): void;
}

interface NodeSqliteModule {
  readonly DatabaseSync: new (path: string, options: { readOnly: boolean; timeout: number }) => DatabaseSync;
}

/**
 * The oldest Node whose node:sqlite has everything the wrapper uses: `isTransaction` and the
 * `timeout` option came in 22.16 (and 24.0), `setAllowUnknownNamedParameters` in 22.15.
 */
const NODE_SQLITE_SINCE: readonly [major: number, minor: number] = [22, 16];

function nodeSqliteModule(): NodeSqliteModule | undefined {
  const [sinceMajor, sinceMinor] = NODE_SQLITE_SINCE;
  if (NODE_MAJOR < sinceMajor || (NODE_MAJOR === sinceMajor && NODE_MINOR < sinceMinor)) return undefined;
  // getBuiltinModule, not import: on a Node without node:sqlite the import would fail to load the server.
  try {
    return process.getBuiltinModule('node:sqlite') as NodeSqliteModule | undefined;
  } catch {
    return undefined;
  }
}

function loadNodeSqlite(): NodeSqliteModule {
  const module = nodeSqliteModule();
  if (module === undefined) {
    throw new Error(
      `node:sqlite is not usable in Node ${process.versions.node} (it needs Node >= ${NODE_SQLITE_SINCE.join('.')}); use better-sqlite3`,
    );
  }
  return module;
}

/** better-sqlite3's behaviour over a `node:sqlite` connection (see the module comment). */
class NodeSqliteDatabase implements SqliteDatabase {
  readonly name: string;
  readonly memory: boolean;
  readonly #db: DatabaseSync;
  readonly #verbose: ((sql: string) => void) | undefined;
  #savepoints = 0;

  constructor(sqlite: NodeSqliteModule, path: string, options: OpenSqliteOptions) {
    // node:sqlite has no fileMustExist; a read-only open never creates the file anyway.
    if ((options.fileMustExist ?? false) && path !== ':memory:' && !existsSync(path)) {
      throw new Error(`unable to open database file: ${path} does not exist`);
    }
    this.#db = new sqlite.DatabaseSync(path, {
      readOnly: options.readonly ?? false,
      timeout: options.timeout ?? DEFAULT_TIMEOUT_MS,
    });
    this.name = path;
    this.memory = path === ':memory:' || path === '';
    this.#verbose = options.verbose;
  }

  get open(): boolean {
    return this.#db.isOpen;
  }

  get inTransaction(): boolean {
    return this.#db.isTransaction;
  }

  prepare<Params = unknown[], Row = unknown>(sql: string): SqliteStatement<Params, Row> {
    return new NodeSqliteStatement(this.#db.prepare(sql), sql, this.#verbose) as SqliteStatement<Params, Row>;
  }

  exec(sql: string): this {
    this.#verbose?.(sql);
    this.#db.exec(sql);
    return this;
  }

  pragma(source: string, options: { readonly simple?: boolean } = {}): unknown {
    const rows = this.prepare<unknown[], Record<string, unknown>>(`PRAGMA ${source}`).all();
    if (options.simple !== true) return rows;
    const first = rows[0];
    return first === undefined ? undefined : Object.values(first)[0];
  }

  transaction<Args extends unknown[], Result>(fn: (...args: Args) => Result): SqliteTransaction<Args, Result> {
    const run =
      (begin: string) =>
      (...args: Args): Result => {
        if (!this.#db.isTransaction) return this.#inTransaction(begin, 'COMMIT', 'ROLLBACK', () => fn(...args));
        const savepoint = `callbridge_${++this.#savepoints}`;
        try {
          return this.#inTransaction(`SAVEPOINT ${savepoint}`, `RELEASE ${savepoint}`, `ROLLBACK TO ${savepoint}; RELEASE ${savepoint}`, () =>
            fn(...args),
          );
        } finally {
          this.#savepoints -= 1;
        }
      };
    return Object.assign(run('BEGIN'), { immediate: run('BEGIN IMMEDIATE') });
  }

  // Through exec(), so `verbose` sees BEGIN, COMMIT and ROLLBACK as better-sqlite3's does.
  #inTransaction<Result>(begin: string, commit: string, rollback: string, body: () => Result): Result {
    this.exec(begin);
    try {
      const result = body();
      // Inside the try: a COMMIT can fail (a deferred foreign key) and leave the transaction open.
      this.exec(commit);
      return result;
    } catch (error) {
      // Some errors end the transaction themselves; otherwise undo what it wrote.
      if (this.#db.isTransaction) this.exec(rollback);
      throw error;
    }
  }

  function(name: string, options: { readonly deterministic?: boolean }, fn: (...args: never[]) => unknown): this {
    // node:sqlite throws (a RangeError, a 500) when an integer argument is past 2^53 and is to be
    // read as a number; better-sqlite3 rounds it. Integers come as bigints here, and go to `fn` as
    // numbers when they are safe ones, as bigints past that, which `fn` can hand back as they are.
    const call = fn as (...args: unknown[]) => unknown;
    const withSafeNumbers = (...args: unknown[]): unknown => call(...args.map(safeNumber));
    // node:sqlite registers as many arguments as the function's `length` says.
    Object.defineProperty(withSafeNumbers, 'length', { value: fn.length });
    this.#db.function(name, { deterministic: options.deterministic ?? false, useBigIntArguments: true }, withSafeNumbers);
    return this;
  }

  close(): this {
    if (this.#db.isOpen) this.#db.close();
    return this;
  }
}

class NodeSqliteStatement {
  readonly #statement: StatementSync;
  readonly #sql: string;
  readonly #verbose: ((sql: string) => void) | undefined;

  constructor(statement: StatementSync, sql: string, verbose: ((sql: string) => void) | undefined) {
    // better-sqlite3 ignores named values the statement does not use; callers pass whole rows.
    statement.setAllowUnknownNamedParameters(true);
    this.#statement = statement;
    this.#sql = sql;
    this.#verbose = verbose;
  }

  run(...params: unknown[]): SqliteRunResult {
    const { changes, lastInsertRowid } = this.#statement.run(...this.#bind(params));
    return { changes: Number(changes), lastInsertRowid };
  }

  get(...params: unknown[]): unknown {
    return this.#statement.get(...this.#bind(params));
  }

  all(...params: unknown[]): unknown[] {
    return this.#statement.all(...this.#bind(params));
  }

  iterate(...params: unknown[]): IterableIterator<unknown> {
    return closingOnError(this.#statement.iterate(...this.#bind(params)));
  }

  /** The arguments as better-sqlite3 reads them, for node:sqlite. */
  #bind(params: unknown[]): unknown[] {
    this.#verbose?.(this.#sql);
    const values = params.length === 1 && Array.isArray(params[0]) ? (params[0] as unknown[]) : params;
    return values.map(bindable);
  }
}

/**
 * `rows`, closed when reading a row throws, as better-sqlite3's iterators are. node:sqlite leaves
 * the statement running after an error raised on the JavaScript side (an integer past 2^53, say),
 * which keeps its read snapshot, and with it the WAL, held.
 */
function closingOnError(rows: IterableIterator<unknown>): IterableIterator<unknown> {
  const closing: IterableIterator<unknown> = {
    next() {
      try {
        return rows.next();
      } catch (error) {
        rows.return?.();
        throw error;
      }
    },
    return(value?: unknown) {
      return rows.return?.(value) ?? { done: true, value };
    },
    [Symbol.iterator]() {
      return closing;
    },
  };
  return closing;
}

/** A bigint a number holds exactly, as that number; anything else as it is. */
function safeNumber(value: unknown): unknown {
  return typeof value === 'bigint' && value >= MIN_SAFE && value <= MAX_SAFE ? Number(value) : value;
}
const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** undefined binds NULL (node:sqlite refuses it), in a named-parameter object too. */
function bindable(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value)) return value;
  const named: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) named[key] = item === undefined ? null : item;
  return named;
}
