/** `deliveryThread: 'auto'` counts the cores a container's CPU quota allows, not the host's. */
import { describe, expect, it } from 'vitest';
import { cgroupCpuQuota, usableCores, type ReadText } from '../../src/exporter/usable-cores.js';

const files = (contents: Record<string, string>): ReadText => (path) => contents[path];

describe('usable cores', () => {
  it('reads a cgroup v2 quota', () => {
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }))).toBe(1.5);
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }))).toBeUndefined();
  });

  it('reads a cgroup v1 quota, where -1 means none', () => {
    const v1 = (quota: string) =>
      files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': `${quota}\n`, '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' });
    expect(cgroupCpuQuota(v1('50000'))).toBe(0.5);
    expect(cgroupCpuQuota(v1('-1'))).toBeUndefined();
  });

  it('caps the schedulable CPUs by the quota, and ignores what it cannot read or parse', () => {
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': '100000 100000' }), 32)).toBe(1);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': '800000 100000' }), 4)).toBe(4);
    expect(usableCores(files({}), 8)).toBe(8);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': 'garbage' }), 8)).toBe(8);
    expect(usableCores(files({ '/sys/fs/cgroup/cpu.max': '0 100000' }), 8)).toBe(8);
  });

  it('reads this machine without throwing', () => {
    expect(usableCores()).toBeGreaterThanOrEqual(1);
  });
});
