/**
 * How many cores this process may use, for `deliveryThread: 'auto'`. `os.availableParallelism()`
 * sees the CPUs the process may be scheduled on, but not a container's CPU quota: a container
 * limited to one CPU on a 32-core host reads 32 there, and a delivery worker would then compete
 * with the application for its one CPU. So the cgroup quota (v2 `cpu.max`, or v1
 * `cpu.cfs_quota_us` / `cpu.cfs_period_us`, as a container sees them at /sys/fs/cgroup) caps it.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** Reads a file's text, or undefined when it cannot. */
export type ReadText = (path: string) => string | undefined;

const readText: ReadText = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** Cores usable by this process: the schedulable CPUs, capped by a cgroup CPU quota if any. */
export function usableCores(read: ReadText = readText, schedulable: number = availableParallelism()): number {
  const quota = cgroupCpuQuota(read);
  return quota === undefined ? schedulable : Math.min(schedulable, quota);
}

/** The cgroup CPU quota in CPUs (1.5 for "150000 100000"), or undefined when unlimited or unknown. */
export function cgroupCpuQuota(read: ReadText): number | undefined {
  const v2 = read('/sys/fs/cgroup/cpu.max');
  if (v2 !== undefined) {
    const [quota, period] = v2.trim().split(/\s+/);
    return ratio(quota, period);
  }
  return ratio(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')?.trim(), read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')?.trim());
}

function ratio(quota: string | undefined, period: string | undefined): number | undefined {
  // "max" (v2) and -1 (v1) mean no quota.
  const cpus = Number(quota) / Number(period);
  return Number.isFinite(cpus) && cpus > 0 ? cpus : undefined;
}
