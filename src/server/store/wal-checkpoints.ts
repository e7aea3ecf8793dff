/**
 * WAL checkpoints off the request path: a worker thread with its own connection copies committed
 * pages from the WAL into the database file, so neither the copying nor its fsyncs run inside a
 * request (SPEC §6: ingest throughput).
 *
 * Measured with 1000-item `call/upsert_batch` requests: SQLite's own checkpoint (every 1000 WAL
 * pages, inside the commit that crosses it) made commits 12.5 ms instead of 3.5 ms; the same work
 * from a timer on the main thread still took 100-170 ms of its time every second (~12 µs per
 * call), because random span/trace ids touch index pages all over the file (~2 pages per call).
 * On its own thread that time overlaps the requests.
 *
 * Durability does not depend on any of this: with WAL and `synchronous = NORMAL` a commit is in
 * the WAL (in the OS's hands) before the request is answered, which survives a crash of the
 * process (SPEC §2.5). A checkpoint only lets the WAL restart from its beginning.
 *
 * How the WAL stays bounded. A checkpoint can only let the WAL restart if it has copied every
 * frame when the writer begins its next transaction; under sustained ingest the writer commits
 * while the worker copies, so the worker alone could trail forever. When the worker reports a WAL
 * longer than `catchUpFrames`, the main thread (the only writer, between transactions) copies the
 * few frames committed meanwhile, and the next write restarts the WAL. Readers are the limit no
 * checkpoint can pass: frames newer than the oldest open read snapshot cannot be copied, and the
 * WAL cannot restart while a reader uses it. A `calls/stream_query` that a slow client holds open
 * for minutes lets the WAL grow for as long; once it ends, the next checkpoints catch up, the WAL
 * restarts and `journal_size_limit` (db.ts) shrinks the file.
 */
import { statSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { betterSqlite3Path, sqliteDriverOf, type SqliteDatabase } from './sqlite.js';

export interface WalCheckpointOptions {
  /**
   * How often the WAL is checkpointed.
   * @default 1000
   */
  readonly intervalMs?: number;
  /**
   * The worker thread starts once the WAL file reaches this size (a server that writes little
   * never pays for a thread); until then SQLite's own `wal_autocheckpoint` backstop applies.
   * @default 16 MiB
   */
  readonly startAtWalBytes?: number;
  /**
   * WAL length (frames) past which the main thread completes the worker's checkpoint, so the WAL
   * restarts instead of growing under sustained writes. Each completion costs the main thread
   * 10-100 ms (the frames of the requests committed during the worker's last pass, more when
   * the exporter shares the CPU); at full ingest speed (~100 MB of WAL per second) this bound
   * makes that every 2-3 s (measured: ~1 µs per call; 2 µs with half this bound).
   * @default 65536 (256 MiB of 4 KiB pages)
   */
  readonly catchUpFrames?: number;
  /**
   * The better-sqlite3 module the worker loads. Should it fail to (a bundle without the native
   * module beside it, a runtime whose workers cannot load it), the checkpoints run on this thread
   * instead, between requests; so does each checkpoint that fails inside the worker.
   * @default the main connection's driver: `better-sqlite3` as this module resolves it, or `node:sqlite`
   */
  readonly driverPath?: string;
  /**
   * Told of every checkpoint and where it ran (tests and diagnostics: a worker that cannot load
   * falls back without a sound).
   */
  readonly onCheckpoint?: (where: 'worker' | 'main thread') => void;
}

/** What the worker reports after each checkpoint (SQLite's `wal_checkpoint` row). */
interface CheckpointResult {
  readonly busy: number;
  readonly log: number;
  readonly checkpointed: number;
}

export const DEFAULT_CHECKPOINT_INTERVAL_MS = 1000;
const DEFAULT_START_AT_WAL_BYTES = 16 * 1024 * 1024;
const DEFAULT_CATCH_UP_FRAMES = 65536;
/**
 * The worker repeats its checkpoint (at most MAX_PASSES times) until fewer than SETTLED_FRAMES
 * were committed during the last pass: a 1 s backlog took ~200 ms to copy, during which the
 * writer added ~4500 frames, which the main thread then copied in ~50 ms; with more passes
 * 900-2900 frames are left for it (10-35 ms), about one request's commit.
 */
const MAX_PASSES = 4;
const SETTLED_FRAMES = 500;

/**
 * The worker, as CommonJS source (`eval`): the package ships no separate worker file. It opens
 * its connection with better-sqlite3 from `driverPath`, or with node:sqlite when there is none. It
 * checkpoints (PASSIVE: never waits for readers, never blocks the writer) every `intervalMs`,
 * reports each result (SQLite's row: `log` frames in the WAL, `checkpointed` of them copied),
 * and closes its connection when told to stop.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const connect = () => {
  if (workerData.driverPath === undefined) {
    // node:sqlite would create a missing file; the checkpoints belong to the server's own.
    if (!require('node:fs').existsSync(workerData.dbPath)) throw new Error('no database at ' + workerData.dbPath);
    const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(workerData.dbPath, { timeout: 5000 });
    const statement = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
    return { pass: () => statement.get(), close: () => db.close() };
  }
  const Database = require(workerData.driverPath);
  const db = new Database(workerData.dbPath, { fileMustExist: true });
  return { pass: () => db.pragma('wal_checkpoint(PASSIVE)')[0], close: () => db.close() };
};
const db = connect();
const checkpoint = () => {
  try {
    // Each pass copies what was committed during the previous one, so the remainder shrinks.
    let result = db.pass();
    for (let more = 1; more < workerData.maxPasses; more++) {
      const next = db.pass();
      const committedMeanwhile = next.log - result.log;
      result = next;
      if (committedMeanwhile < workerData.settledFrames) break;
    }
    parentPort.postMessage({ busy: result.busy, log: result.log, checkpointed: result.checkpointed });
  } catch (error) {
    parentPort.postMessage({ error: String(error) });
  }
};
const timer = setInterval(checkpoint, workerData.intervalMs);
checkpoint();
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

/**
 * Keep the WAL of `db` checkpointed from a worker thread until the returned function is called
 * (it resolves once the worker has closed its connection). Does nothing for in-memory databases.
 *
 * @example
 * const stopCheckpoints = startWalCheckpoints(db);
 * // ... serve ...
 * await stopCheckpoints();
 * closeDatabase(db);
 */
export function startWalCheckpoints(db: SqliteDatabase, options: WalCheckpointOptions = {}): () => Promise<void> {
  if (db.memory) return async () => {};
  const intervalMs = options.intervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS;
  const startAtWalBytes = options.startAtWalBytes ?? DEFAULT_START_AT_WAL_BYTES;
  const catchUpFrames = options.catchUpFrames ?? DEFAULT_CATCH_UP_FRAMES;
  const walPath = `${db.name}-wal`;
  let worker: Worker | null = null;
  let workerExited: Promise<void> = Promise.resolve();
  let onMainThread = false;

  const checkpointHere = (): void => {
    if (!db.open || db.inTransaction) return;
    try {
      db.pragma('wal_checkpoint(PASSIVE)');
      options.onCheckpoint?.('main thread');
    } catch {
      // An I/O error (disk full) must not crash the server from a timer: the next tick retries,
      // and the next commit meets the same error and answers it as a 500.
    }
  };

  const startWorker = (): void => {
    const thread = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        // undefined: node:sqlite, built into Node.
        driverPath: options.driverPath ?? (sqliteDriverOf(db) === 'node:sqlite' ? undefined : betterSqlite3Path()),
        dbPath: db.name,
        intervalMs,
        maxPasses: MAX_PASSES,
        settledFrames: SETTLED_FRAMES,
      },
    });
    // The server's lifetime, not the worker's, decides when the process may exit.
    thread.unref();
    thread.on('message', (result: CheckpointResult | { error: string }) => {
      // The worker's connection failed where this one may not (its own file handle, its own
      // driver): checkpoint here this time, so the WAL does not grow on to SQLite's backstop.
      if ('error' in result) {
        checkpointHere();
        return;
      }
      options.onCheckpoint?.('worker');
      // The worker copied the frames there when it began (`log`); the writer kept committing
      // meanwhile, so only a checkpoint between two of its transactions can complete.
      if (result.log >= catchUpFrames) checkpointHere();
    });
    thread.on('error', () => {
      // No worker (the driver cannot load in one here): checkpoint on this thread instead.
      worker = null;
      onMainThread = true;
    });
    workerExited = new Promise((resolve) => thread.once('exit', () => resolve()));
    worker = thread;
  };

  const tick = (): void => {
    if (!db.open) return;
    if (onMainThread) {
      checkpointHere();
      return;
    }
    if (worker === null && walBytes(walPath) >= startAtWalBytes) startWorker();
  };
  const timer = setInterval(tick, intervalMs);
  // A server that is otherwise done must not stay alive for its checkpoint timer.
  timer.unref();

  return async () => {
    clearInterval(timer);
    const running = worker;
    worker = null;
    onMainThread = false;
    running?.postMessage('stop');
    await workerExited;
  };
}

function walBytes(walPath: string): number {
  return statSync(walPath, { throwIfNoEntry: false })?.size ?? 0;
}
