/**
 * Scenarios b (producer CPU per span) and c (event-loop stalls), both at a paced rate.
 *
 * cpu:   process.cpuUsage() of this process (every thread) from the first paced span until the sink
 *        has counted the last one (so the exporter's own mapping, serialising and sending are
 *        included), divided by the spans; and the main thread's busy time over the same span
 *        (event-loop utilization). A warm-up second at the same rate runs first and is not counted.
 * stall: the same load, measured three ways: the max of monitorEventLoopDelay({resolution: 1}),
 *        the longest gap between two turns of a setImmediate loop, and the longest single
 *        `span.end()`; meanwhile a traced HTTP request to a server in this process runs in a loop,
 *        and its latency percentiles are reported. The setImmediate loop keeps a core busy, which is
 *        why stalls and CPU are measured in separate runs.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createSide } from '../sides.mjs';
import { producePaced } from '../workload.mjs';
import { sinkStats, waitForSpans } from '../lib/sink-client.mjs';
import { quantile } from '../lib/stats.mjs';
import { threadCpuSnapshot, threadCpuSplit } from '../lib/thread-cpu.mjs';

const WARMUP_MS = 1000;

async function settle(tracing, sinkUrl, baseline, produced) {
  await tracing.flush().catch(() => {});
  // `none` exports nothing: there is nothing to wait for.
  if (baseline === undefined) return undefined;
  return waitForSpans(sinkUrl, produced, { baseline: baseline.spans });
}

/** A second at the measured rate so the JIT, pools and sockets are warm; waits for its delivery. */
async function warmUp(tracing, sinkUrl, rate, exports) {
  const start = exports ? await sinkStats(sinkUrl) : undefined;
  const warm = await producePaced(tracing.tracer, { spansPerSecond: rate, durationMs: WARMUP_MS });
  await settle(tracing, sinkUrl, start, warm.spans);
  return warm;
}

export async function cpu(side, { sinkUrl, rate, durationMs }) {
  const beforeSide = threadCpuSnapshot();
  const tracing = await createSide(side, sinkUrl);
  const exports = side !== 'none';
  const warm = await warmUp(tracing, sinkUrl, rate, exports);
  const before = exports ? await sinkStats(sinkUrl) : undefined;

  const threadsStart = threadCpuSnapshot();
  const cpuStart = process.cpuUsage();
  const eluStart = performance.eventLoopUtilization();
  const { spans, elapsedMs } = await producePaced(tracing.tracer, { spansPerSecond: rate, durationMs });
  const after = await settle(tracing, sinkUrl, before, spans);
  const used = process.cpuUsage(cpuStart);
  const mainThread = performance.eventLoopUtilization(eluStart);
  const threads = threadCpuSplit({ beforeSide, start: threadsStart, end: threadCpuSnapshot(), spans });
  await tracing.shutdown().catch(() => {});
  const cpuUs = used.user + used.system;
  return {
    warmupSpans: warm.spans,
    spans,
    elapsedMs,
    arrived: after === undefined ? undefined : after.spans - before.spans,
    cpuMs: cpuUs / 1000,
    cpuUsPerSpan: cpuUs / spans,
    // Time the application's own thread was busy (event-loop utilization: outside the poll wait),
    // per span. process.cpuUsage() counts every thread; this isolates what the app's loop paid,
    // which differs when an exporter works on a thread of its own.
    mainThreadBusyUsPerSpan: (mainThread.active * 1000) / spans,
    // Share of one core the producer used while producing at this rate.
    coreShare: cpuUs / 1000 / elapsedMs,
    // The same CPU by thread (Linux): the application's, the side's own (callbridge's delivery
    // worker), the runtime's helpers.
    ...threads,
  };
}

/** A server in this process that answers each request inside a span, and a client loop on it. */
async function startTracedRequests(tracer) {
  const server = http.createServer((req, res) => {
    tracer.startActiveSpan('GET /ping', (span) => {
      span.setAttribute('http.route', '/ping');
      res.end('pong');
      span.end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const { port } = server.address();
  const latencies = [];
  let running = true;
  const ping = () =>
    new Promise((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/ping', agent }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
    });
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      await ping();
      latencies.push(performance.now() - t0);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      await new Promise((resolve) => server.close(resolve));
      return latencies;
    },
  };
}

/**
 * CPU time of this (the main) thread in ms, from the kernel's per-thread run time
 * (`/proc/thread-self/schedstat`, nanoseconds, read with one pread of an open fd: ~1 µs). It
 * counts neither other threads (an exporter's worker, GC helpers) nor time the VM was not running
 * us. Where /proc is missing, process.cpuUsage() (every thread) stands in.
 */
function mainThreadCpuClock() {
  try {
    const fd = openSync('/proc/thread-self/schedstat', 'r');
    const buffer = Buffer.alloc(64);
    return {
      source: 'main thread (schedstat)',
      ms() {
        const length = readSync(fd, buffer, 0, buffer.length, 0);
        const end = buffer.indexOf(32);
        return Number(buffer.toString('latin1', 0, end < 0 || end > length ? length : end)) / 1e6;
      },
      close: () => closeSync(fd),
    };
  } catch {
    return {
      source: 'process (cpuUsage, every thread)',
      ms() {
        const { user, system } = process.cpuUsage();
        return (user + system) / 1000;
      },
      close() {},
    };
  }
}

/**
 * Gaps between consecutive turns of a setImmediate loop. This VM is descheduled for 2-7 ms
 * several times a second even when idle (an empty setImmediate loop shows it), so a raw gap
 * cannot tell our work from the hypervisor's. The CPU the main thread used during a gap can: the
 * "busy" stall is min(gap, main-thread CPU in it), which is near zero when we were simply not
 * running, and does not count an exporter's work on another thread.
 */
function startImmediateGaps() {
  const clock = mainThreadCpuClock();
  let running = true;
  let maxGap = 0;
  let maxBusy = 0;
  let gapsOver1ms = 0;
  let busyOver1ms = 0;
  let last = performance.now();
  let lastCpu = clock.ms();
  const turn = () => {
    if (!running) return;
    const now = performance.now();
    const cpu = clock.ms();
    const gap = now - last;
    const busy = Math.min(gap, cpu - lastCpu);
    if (gap > maxGap) maxGap = gap;
    if (busy > maxBusy) maxBusy = busy;
    if (gap > 1) gapsOver1ms++;
    if (busy > 1) busyOver1ms++;
    last = now;
    lastCpu = cpu;
    setImmediate(turn);
  };
  setImmediate(turn);
  return () => {
    running = false;
    clock.close();
    return { maxGap, maxBusy, gapsOver1ms, busyOver1ms, busySource: clock.source };
  };
}

export async function stall(side, { sinkUrl, rate, durationMs }) {
  const tracing = await createSide(side, sinkUrl);
  const exports = side !== 'none';
  await warmUp(tracing, sinkUrl, rate, exports);
  const before = exports ? await sinkStats(sinkUrl) : undefined;

  const requests = await startTracedRequests(tracing.tracer);
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const stopGaps = startImmediateGaps();
  let maxEndMs = 0;
  let endsOver1ms = 0;
  const { spans } = await producePaced(tracing.tracer, {
    spansPerSecond: rate,
    durationMs,
    onEnd: (ms) => {
      if (ms > maxEndMs) maxEndMs = ms;
      if (ms > 1) endsOver1ms++;
    },
  });
  const gaps = stopGaps();
  histogram.disable();
  const latencies = await requests.stop();
  // Every traced request made a span too.
  const after = await settle(tracing, sinkUrl, before, spans + latencies.length);
  await tracing.shutdown().catch(() => {});
  return {
    spans: spans + latencies.length,
    arrived: after === undefined ? undefined : after.spans - before.spans,
    // monitorEventLoopDelay reports delay beyond its 1 ms timer, in ns.
    loopDelayMaxMs: histogram.max / 1e6,
    loopDelayP99Ms: histogram.percentile(99) / 1e6,
    immediateGapMaxMs: gaps.maxGap,
    immediateGapsOver1ms: gaps.gapsOver1ms,
    busyStallMaxMs: gaps.maxBusy,
    busyStallsOver1ms: gaps.busyOver1ms,
    spanEndMaxMs: maxEndMs,
    spanEndsOver1ms: endsOver1ms,
    requests: latencies.length,
    requestP50Ms: quantile(latencies, 0.5),
    requestP99Ms: quantile(latencies, 0.99),
    requestMaxMs: Math.max(...latencies),
  };
}
