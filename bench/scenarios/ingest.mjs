/**
 * Scenario f, first half: how many calls (start + end) per second the local server ingests from
 * the exporter running on the same machine (server in its own process, file DB).
 *
 * Production is flat out but respects backpressure: while the exporter holds more than
 * `maxQueuedBytes` we wait, as a load generator must when it measures the receiver rather than
 * the queue bound (otherwise the exporter would rightly drop items as `queue_full`). The clock
 * stops when forceFlush resolves, i.e. when the server has committed every batch.
 */
import { createSide } from '../sides.mjs';
import { produceTrace, SPANS_PER_TRACE } from '../workload.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function ingest(side, { serverUrl, spans, projectId, maxQueuedBytes = 16 * 2 ** 20 }) {
  const tracing = await createSide(side, serverUrl, { projectId });
  const queuedBytes = () => tracing.stats()?.queuedBytes ?? 0;
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  let waits = 0;
  const traces = Math.ceil(spans / SPANS_PER_TRACE);
  for (let t = 0; t < traces; t++) {
    produceTrace(tracing.tracer, t * SPANS_PER_TRACE);
    if ((t + 1) % 10 === 0) {
      await new Promise((resolve) => setImmediate(resolve));
      while (queuedBytes() > maxQueuedBytes) {
        waits++;
        await sleep(2);
      }
    }
  }
  await tracing.flush();
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuStart);
  const stats = tracing.stats();
  await tracing.shutdown().catch(() => {});
  const produced = traces * SPANS_PER_TRACE;
  return {
    produced,
    elapsedMs,
    callsPerSec: produced / (elapsedMs / 1000),
    backpressureWaits: waits,
    producerCpuMs: (cpu.user + cpu.system) / 1000,
    exporterStats: stats,
  };
}
