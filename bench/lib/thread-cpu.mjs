/**
 * CPU time of each thread of this process, from the kernel (`/proc/self/task/<tid>/schedstat`:
 * nanoseconds on a CPU, so neither another thread's work nor the VM's descheduling counts).
 * process.cpuUsage() sums every thread; this splits the sum, so a run shows whether the
 * application's thread, an exporter's own thread (callbridge's delivery worker) or the runtime's
 * helpers (V8's parallel scavenges, concurrent marking and compiling) spent it.
 *
 * Linux only: elsewhere every function returns undefined and the split is simply not reported.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** `Map<tid, ms>` of every thread alive now, or undefined where /proc has no task list. */
export function threadCpuSnapshot() {
  let tids;
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return undefined;
  }
  const snapshot = new Map();
  for (const tid of tids) {
    try {
      const text = readFileSync(`/proc/self/task/${tid}/schedstat`, 'latin1');
      snapshot.set(tid, Number(text.slice(0, text.indexOf(' '))) / 1e6);
    } catch {
      // The thread ended between the listing and the read: its time is gone with it.
    }
  }
  return snapshot;
}

/**
 * The CPU spent between `start` and `end` (snapshots), in µs per span, split into the
 * application's thread (this one: its tid is the pid), the threads that did not exist at
 * `beforeSide` (taken before the side was built: its delivery worker, and any thread pool its
 * work started) and the rest (the runtime's helper threads, which every side shares).
 */
export function threadCpuSplit({ beforeSide, start, end, spans }) {
  if (beforeSide === undefined || start === undefined || end === undefined) return undefined;
  const split = { app: 0, sideThreads: 0, helpers: 0 };
  const mainTid = String(process.pid);
  for (const [tid, ms] of end) {
    const spent = ms - (start.get(tid) ?? 0);
    if (tid === mainTid) split.app += spent;
    else if (beforeSide.has(tid)) split.helpers += spent;
    else split.sideThreads += spent;
  }
  const perSpan = (ms) => (ms * 1000) / spans;
  return { appUsPerSpan: perSpan(split.app), sideThreadsUsPerSpan: perSpan(split.sideThreads), helpersUsPerSpan: perSpan(split.helpers) };
}
