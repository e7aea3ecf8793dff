/**
 * The delivery worker runs below the application's priority: an exporter must never take CPU the
 * application needs (SPEC §4.12). When the cores are idle the worker gets them all the same; when
 * the application is busy, the kernel runs the application first and the worker's queue absorbs
 * the wait (bounded by `maxQueueBytes`, drops counted).
 *
 * Linux only: `setpriority(PRIO_PROCESS, tid)` applies to one thread there, and a thread's id is
 * the last part of `/proc/thread-self`. Elsewhere (and if /proc is not mounted) nothing changes.
 */
import { readlinkSync } from 'node:fs';
import { constants, setPriority } from 'node:os';

/** Lower the calling thread's scheduling priority; true when it was lowered. Never throws. */
export function lowerThisThreadPriority(): boolean {
  if (process.platform !== 'linux') return false;
  try {
    const threadId = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(threadId) || threadId === process.pid) return false;
    setPriority(threadId, constants.priority.PRIORITY_BELOW_NORMAL);
    return true;
  } catch {
    return false;
  }
}
