/**
 * The end of the process, for every exporter and every `register()`. An exporter behind the
 * application's own processor flushes itself; `register()` turns that off on its exporter
 * (`flushOnExit: false`) and takes part itself, flushing its provider and then the exporter.
 *
 * - `beforeExit` (the event loop ran dry: a script that simply ends): each exporter that was given
 *   spans since its last exit flush flushes them, bounded by `shutdownTimeoutMs`. Without it the
 *   spans waiting for `flushIntervalMs` were neither delivered nor counted: the batcher's timers
 *   are unref'd so that they never keep a running app alive. The flush's requests keep the process
 *   alive; when they end `beforeExit` fires again, finds nothing new and the process exits (at
 *   most MAX_EXIT_FLUSH_ROUNDS rounds flush).
 * - `exit` (also after `process.exit()` or an uncaught exception, where nothing can be sent any
 *   more): an exporter that still holds spans says how many are lost, so that none is lost
 *   silently (SPEC §4.1).
 *
 * One listener per event for the whole process. Exporters are held until they are shut down, not by
 * `WeakRef`: with worker delivery, an exporter the application no longer references may still
 * have spans in its worker, which must be flushed or counted like any other.
 */

/** What an exporter (or `register()`) tells the watch. */
export interface ExitParticipant {
  /** Flush what arrived since the last call, if anything did; never rejects. */
  flushBeforeExit(): void;
  /** At `exit` (once per process): say what is still held and therefore lost, if anything. */
  reportLostAtExit(): void;
}

const participants = new Set<ExitParticipant>();
let listening = false;

/**
 * `beforeExit` rounds in which exit flushes run, per process. A flush keeps the process alive
 * until it ends, and `beforeExit` then fires again: an application whose own `beforeExit` work
 * makes a span every time would never exit (without callbridge it exits after one round, that
 * span unsent). Past this, what is still held is said to be lost at `exit`.
 */
export const MAX_EXIT_FLUSH_ROUNDS = 5;
let exitFlushRounds = 0;

/** Watch `participant` until the returned function is called (once its shutdown is done). */
export function watchExit(participant: ExitParticipant): () => void {
  participants.add(participant);
  if (!listening) {
    listening = true;
    process.on('beforeExit', () => {
      if (++exitFlushRounds > MAX_EXIT_FLUSH_ROUNDS) return;
      forEachParticipant((watched) => watched.flushBeforeExit());
    });
    process.on('exit', () => forEachParticipant((watched) => watched.reportLostAtExit()));
  }
  return () => {
    participants.delete(participant);
  };
}

/**
 * A `beforeExit` action: run `flush` when `count()` (spans handed on so far) moved since the last
 * run began, and never while one runs. `beforeExit` fires again whenever the loop runs dry, so
 * after a flush it fires once more, finds nothing new and lets the process exit (an action that
 * always flushed could keep an idle process looping).
 */
export function flushWhenNew(count: () => number, flush: () => Promise<void>): () => void {
  let flushing = false;
  let flushedUpTo = 0;
  return () => {
    const now = count();
    if (flushing || now === flushedUpTo) return;
    flushing = true;
    flushedUpTo = now;
    void flush().finally(() => {
      flushing = false;
    });
  };
}

function forEachParticipant(act: (participant: ExitParticipant) => void): void {
  for (const participant of participants) {
    try {
      act(participant);
    } catch {
      // An exit hook must not throw into the process's own exit path (SPEC §4.12).
    }
  }
}
