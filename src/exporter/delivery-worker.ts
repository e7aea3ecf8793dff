/**
 * The delivery worker: the thread that maps, serialises and sends the spans the exporter copies
 * to it (`deliveryThread: 'worker'`). It runs the same batcher, codec and transport as main-thread
 * delivery, so every guarantee of SPEC §4 holds unchanged; this file only connects them to the
 * message port of `worker-protocol.ts`.
 *
 * Built as its own entry (`dist/export-worker.js` / `.cjs`), its dependencies included, and started
 * by `WorkerDelivery` without the application's preloads (`worker-start-options.ts`).
 * No OpenTelemetry SDK runs here, so the worker's own HTTP requests are never traced; its `diag`
 * lines are forwarded to the application's `diag` logger.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { diag, DiagLogLevel, type DiagLogger } from '@opentelemetry/api';
import { createBatcher } from '../batcher/index.js';
import { createTransport } from '../client/transport.js';
import { apiIsBundled } from '../log.js';
import type { SpanInput } from '../mapping/index.js';
import { createSpanCodec } from './span-codec.js';
import { decodeSpan } from './span-transfer.js';
import { lowerThisThreadPriority } from './thread-priority.js';
import type { DeliveryWorkerData, DiagLevel, FromWorker, ToWorker, WorkerStatsReport } from './worker-protocol.js';

const port = parentPort;
if (port === null) throw new Error('callbridge: export-worker must be started as a worker thread');

const { options, statsIntervalMs, reports, reported } = workerData as DeliveryWorkerData;

// This bundle's API copy registers the forwarding logger: never compare it with the one on disk.
apiIsBundled();
diag.setLogger(forwardingLogger(), DiagLogLevel.ALL);
lowerThisThreadPriority();

/** Whether the batcher delivers, as it last said (`onDeliveringChanged`): what every report carries. */
let delivering = false;

const batcher = createBatcher<SpanInput>({
  ...options,
  // Back-pressure is the application thread's to apply (it waits for this worker's reports); here
  // longer slices would only delay the messages that carry spans and acknowledgements.
  backpressureMs: 0,
  transport: createTransport(options),
  codec: createSpanCodec(options.projectId),
  // Room under maxQueueBytes was just freed: an application thread waiting for it learns at once.
  onBatchSettled: report,
  // A flush waiting on the application's thread holds the process while this worker delivers.
  onDeliveringChanged: (now) => {
    delivering = now;
    report();
  },
});

let ackSeq = 0;
let lastReported = '';

port.on('message', (message: ToWorker) => {
  switch (message.type) {
    case 'spans':
      for (const span of message.spans) batcher.add(decodeSpan(span));
      ackSeq = message.seq;
      report();
      break;
    case 'flush':
      void batcher.forceFlush().then(() => {
        // Posted before the answer, on the same channel: said before the process may end.
        if (message.reportDrops === true) batcher.reportPendingDrops();
        answer(message.id);
      });
      break;
    case 'shutdown':
      void batcher.shutdown(message.timeoutMs).then(() => answer(message.id));
      break;
    case 'dropHeld':
      // Its drop report goes out before the answer, on the same channel.
      void batcher.dropHeld().then(() => answer(message.id));
      break;
  }
});

// Deliveries and drops happen between messages: report them while they change. Unref'd, though
// the worker as a whole is unref'd by the exporter anyway.
setInterval(report, statsIntervalMs).unref();
post({ type: 'ready' });

function report(): void {
  const current = currentReport();
  const signature = reportSignature(current);
  if (signature === lastReported) return;
  lastReported = signature;
  post({ type: 'stats', ...current });
}

function answer(id: number): void {
  const current = currentReport();
  lastReported = reportSignature(current);
  post({ type: 'done', id, ...current });
}

function currentReport(): WorkerStatsReport {
  return {
    ackSeq,
    stats: batcher.stats(),
    retrying: batcher.isRetrying(),
    delivering,
    waitingBytes: batcher.waitingBytes(),
    sizeCorrection: batcher.sizeCorrection(),
  };
}

function post(message: FromWorker): void {
  reports.postMessage(message);
  Atomics.add(reported, 0, 1);
  Atomics.notify(reported, 0);
}

function reportSignature({ ackSeq, stats, retrying, delivering, waitingBytes, sizeCorrection }: WorkerStatsReport): string {
  const d = stats.dropped;
  return `${ackSeq} ${retrying} ${delivering} ${waitingBytes} ${sizeCorrection} ${stats.queued} ${stats.queuedBytes} ${stats.inFlight} ${stats.delivered} ${stats.retried} ${stats.batchesSent} ${d.queue_full} ${d.rejected} ${d.auth} ${d.retries_exhausted} ${d.too_large} ${d.shutdown}`;
}

function forwardingLogger(): DiagLogger {
  const forward = (level: DiagLevel) => (message: string, ...args: unknown[]) =>
    post({ type: 'diag', level, message: args.length === 0 ? message : `${message} ${args.map(String).join(' ')}` });
  return {
    error: forward('error'),
    warn: forward('warn'),
    info: forward('info'),
    debug: forward('debug'),
    verbose: forward('verbose'),
  };
}
