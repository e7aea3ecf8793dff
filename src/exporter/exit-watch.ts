/**
 * The end of the process, for exporters used without `register()` (behind the application's own
 * `SimpleSpanProcessor` or `BatchSpanProcessor`), which has its own exit flush.
 *
 * - `beforeExit` (the event loop ran dry: a script that simply ends): each exporter that was given
 *   spans since its last exit flush flushes them, bounded by `shutdownTimeoutMs`. Without it the
 *   spans waiting for `flushIntervalMs` were neither delivered nor counted: the batcher's timers
 *   are unref'd so that they never keep a running app alive. The flush's requests keep the process
 *   alive; when they end `beforeExit` fires again, finds nothing new and the process exits.
 * - `exit` (also after `process.exit()` or an uncaught exception, where nothing can be sent any
 *   more): an exporter that still holds spans says how many are lost, so that none is lost
 *   silently (SPEC §4.1).
 *
 * One listener per event for the whole process, and exporters are held by `WeakRef`: an exporter
 * the application dropped costs no listener and is not kept alive.
 */

/** What an exporter tells the watch. */
export interface ExitParticipant {
  /** Flush what arrived since the last call, if anything did; never rejects. */
  flushBeforeExit(): void;
  /** Say (once) what is still held and therefore lost, if anything. */
  reportLostAtExit(): void;
}

const participants = new Set<WeakRef<ExitParticipant>>();
let listening = false;

/** Watch `participant` until the returned function is called (at shutdown). */
export function watchExit(participant: ExitParticipant): () => void {
  const ref = new WeakRef(participant);
  participants.add(ref);
  if (!listening) {
    listening = true;
    process.on('beforeExit', () => forEachParticipant((watched) => watched.flushBeforeExit()));
    process.on('exit', () => forEachParticipant((watched) => watched.reportLostAtExit()));
  }
  return () => {
    participants.delete(ref);
  };
}

function forEachParticipant(act: (participant: ExitParticipant) => void): void {
  for (const ref of participants) {
    const participant = ref.deref();
    if (participant === undefined) {
      participants.delete(ref);
      continue;
    }
    try {
      act(participant);
    } catch {
      // An exit hook must not throw into the process's own exit path (SPEC §4.12).
    }
  }
}
