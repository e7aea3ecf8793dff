/**
 * Captured `call/upsert_batch` bodies of the benchmark's spans, for replaying into the local
 * server without the exporter on the same cores (bench/replay.mjs).
 *
 * The exporter (the built package's `register()`, defaults) sends the workload's spans to a
 * recorder on loopback that keeps every body as sent and answers as the service does (one `res`
 * entry per item). Bodies are stored one per line: JSON text never holds a raw newline.
 */
import { createWriteStream, existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import http from 'node:http';
import { once } from 'node:events';
import { createSide } from '../sides.mjs';
import { produceTrace, SPANS_PER_TRACE } from '../workload.mjs';
import { BENCH_PROJECT } from './constants.mjs';

/** The project the captured bodies name; the replay rewrites it per repetition. */
export const CAPTURED_PROJECT = BENCH_PROJECT;

const MAX_QUEUED_BYTES = 16 * 2 ** 20;

/**
 * Capture the bodies the exporter sends for `spans` spans into `file` (one body per line) and
 * return how many requests and calls they hold.
 */
export async function captureUpsertBodies(file, spans) {
  // Written under another name and renamed once complete: a failed capture leaves no file that a
  // later run would take for a whole one.
  const partial = `${file}.partial`;
  const out = createWriteStream(partial);
  let requests = 0;
  let calls = 0;
  const recorder = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url !== '/call/upsert_batch') {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"reason":"not captured"}');
        return;
      }
      const items = JSON.parse(body.toString('utf8')).batch;
      out.write(body);
      out.write('\n');
      requests++;
      calls += items.filter((item) => item.mode === 'end').length;
      res.writeHead(200, { 'content-type': 'application/json' }).end(`{"res":[${items.map(() => '{}').join(',')}]}`);
    });
  });
  recorder.listen(0, '127.0.0.1');
  await once(recorder, 'listening');
  const url = `http://127.0.0.1:${recorder.address().port}`;
  const tracing = await createSide('callbridge', url, { projectId: CAPTURED_PROJECT });
  for (let t = 0; t < Math.ceil(spans / SPANS_PER_TRACE); t++) {
    produceTrace(tracing.tracer, t * SPANS_PER_TRACE);
    // Wait while the exporter holds much, as the ingest scenario does: no queue_full drops.
    if ((t + 1) % 10 === 0) {
      await new Promise((resolve) => setImmediate(resolve));
      while ((tracing.stats()?.queuedBytes ?? 0) > MAX_QUEUED_BYTES) await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
  await tracing.flush();
  const dropped = Object.values(tracing.stats()?.dropped ?? {}).reduce((a, b) => a + b, 0);
  await tracing.shutdown();
  recorder.close();
  out.end();
  await once(out, 'finish');
  if (dropped > 0) {
    rmSync(partial);
    throw new Error(`the exporter dropped ${dropped} items while capturing`);
  }
  renameSync(partial, file);
  return { requests, calls };
}

/** The bodies of `file` as Buffers (one per line). */
export function readUpsertBodies(file) {
  if (!existsSync(file)) return null;
  const text = readFileSync(file, 'utf8');
  return text.split('\n').filter((line) => line !== '').map((line) => Buffer.from(line, 'utf8'));
}
