/**
 * Scenarios a (end-to-end throughput) and d (peak RSS) share one run: `spans` spans produced flat
 * out, then forceFlush, then wait until the sink has counted everything that will arrive.
 *
 * spans/s = spans the sink counted / (time the sink counted the last one - time production began).
 * The sink stamps arrivals with the wall clock (performance.timeOrigin + now), as we do here, so the
 * polling delay after the last arrival does not count.
 * RSS is sampled every 10 ms (a timer, so it runs whenever production yields) and
 * `process.resourceUsage().maxRSS` gives the kernel's peak for the whole process.
 */
import { createSide } from '../sides.mjs';
import { produceFlatOut } from '../workload.mjs';
import { sinkStats, waitForSpans } from '../lib/sink-client.mjs';

const wallNow = () => performance.timeOrigin + performance.now();

export async function burst(side, { sinkUrl, spans }) {
  const tracing = await createSide(side, sinkUrl);
  const before = await sinkStats(sinkUrl);
  const rssBefore = process.memoryUsage().rss;
  let peakRss = rssBefore;
  // The main thread's heap at the peak: how much of the RSS is this isolate's (a delivery
  // worker's heap is the rest, with native memory).
  let atPeak = process.memoryUsage();
  const sampler = setInterval(() => {
    const usage = process.memoryUsage();
    if (usage.rss > peakRss) {
      peakRss = usage.rss;
      atPeak = usage;
    }
  }, 10);

  const startedAt = wallNow();
  const cpuStart = process.cpuUsage();
  const produced = await produceFlatOut(tracing.tracer, spans);
  const producedAt = wallNow();
  let flushError;
  try {
    await tracing.flush();
  } catch (error) {
    flushError = String(error?.message ?? error);
  }
  const flushedAt = wallNow();
  const after = await waitForSpans(sinkUrl, produced, { baseline: before.spans });
  clearInterval(sampler);
  const cpu = process.cpuUsage(cpuStart);
  const arrived = after.spans - before.spans;
  // The sink's clock is shared by every run: use it only when this run delivered something.
  const lastArrival = arrived > 0 ? after.lastAt : flushedAt;
  const exporterStats = tracing.stats();
  await tracing.shutdown().catch(() => {});
  return {
    produced,
    arrived,
    lost: produced - arrived,
    lostPct: ((produced - arrived) / produced) * 100,
    spansPerSec: arrived / ((lastArrival - startedAt) / 1000),
    produceMs: producedAt - startedAt,
    flushMs: flushedAt - producedAt,
    totalMs: lastArrival - startedAt,
    flushError,
    requests: after.requests - before.requests,
    bytes: after.bytes - before.bytes,
    mismatches: after.mismatches - before.mismatches,
    producerCpuMs: (cpu.user + cpu.system) / 1000,
    rssBeforeMb: rssBefore / 2 ** 20,
    peakRssMb: peakRss / 2 ** 20,
    atPeakMb: { heapTotal: atPeak.heapTotal / 2 ** 20, heapUsed: atPeak.heapUsed / 2 ** 20, external: atPeak.external / 2 ** 20 },
    maxRssMb: process.resourceUsage().maxRSS / 1024,
    exporterStats,
  };
}
