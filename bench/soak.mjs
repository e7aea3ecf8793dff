/**
 * Soak: minutes of traced traffic (`register()` + `trace()`, the built package) into a local
 * server (`callbridge serve`, its own process) through a proxy that injects faults at random:
 * resets, 503 runs, 429, slow answers, short outages. Every 30 s it prints spans sent, delivered,
 * dropped by reason, queue and RSS; at the end it reads every call back from the server and
 * prints duplicated and lost-without-count, which must both be 0 (else the exit code is 1).
 *
 * Usage: npm run soak -- [--minutes 10] [--rate 300] [--seed 1]
 *   --rate: traced requests per second; each makes 3 spans (a root and two children).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startChaosProxy } from './soak/fault-proxy.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { register, trace } = await import(join(ROOT, 'dist/index.js'));

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    rate: { type: 'string', default: '300' },
    seed: { type: 'string', default: '1' },
  },
});
const minutes = Number(args.minutes);
const rate = Number(args.rate);
const seed = Number(args.seed);
if (!(minutes > 0) || !(rate > 0) || !Number.isInteger(seed)) {
  console.error('usage: node bench/soak.mjs [--minutes N>0] [--rate N>0] [--seed INT]');
  process.exit(2);
}

const PROJECT = 'soak/run';
const USER = { username: 'dev', password: 'pw' };
const REQUEST_TIMEOUT_MS = 2_000;
const REPORT_EVERY_MS = 30_000;
const SPANS_PER_REQUEST = 3;

/** `callbridge serve` on a fresh database file, in its own process (its memory is not ours). */
async function startServerProcess(dir) {
  const child = spawn(process.execPath, [join(ROOT, 'dist/cli/main.js'), 'serve', '--port', '0', '--db', join(dir, 'soak.db'), '--user', 'dev:pw'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      out += chunk;
      const match = /listening on (\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`callbridge serve exited with ${code}`)));
  });
  return {
    url,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill('SIGTERM');
      }),
  };
}

/** Every call of the project, page by page: lines read, distinct ids, calls without an end. */
async function readBack(url) {
  const authorization = `Basic ${Buffer.from(`${USER.username}:${USER.password}`).toString('base64')}`;
  const ids = new Set();
  let lines = 0;
  let withoutEnd = 0;
  const PAGE = 20_000;
  for (let offset = 0; ; offset += PAGE) {
    const response = await fetch(`${url}/calls/stream_query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization },
      body: JSON.stringify({ project_id: PROJECT, columns: ['id', 'ended_at'], limit: PAGE, offset }),
    });
    if (response.status !== 200) throw new Error(`stream_query answered ${response.status}: ${await response.text()}`);
    const page = (await response.text()).split('\n').filter((line) => line !== '');
    for (const line of page) {
      const call = JSON.parse(line);
      lines += 1;
      ids.add(call.id);
      if (call.ended_at === null) withoutEnd += 1;
    }
    if (page.length < PAGE) break;
  }
  return { lines, distinct: ids.size, withoutEnd };
}

const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const droppedTotal = (dropped) => Object.values(dropped).reduce((sum, count) => sum + count, 0);
const formatDropped = (dropped) =>
  Object.entries(dropped)
    .map(([reason, count]) => `${reason}=${count}`)
    .join(' ');

const dir = mkdtempSync(join(tmpdir(), 'callbridge-soak-'));
const server = await startServerProcess(dir);
const proxy = await startChaosProxy({ upstream: server.url, seed, slowMs: REQUEST_TIMEOUT_MS + 1_000 });
const tracing = register({
  baseUrl: proxy.url,
  projectId: PROJECT,
  ...USER,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
  flushOnExit: false,
});

// The traced application: a request that retrieves and then generates, three spans each.
const retrieve = trace(async function retrieve(query, k) {
  await new Promise((resolve) => setImmediate(resolve));
  return Array.from({ length: k }, (_, i) => `${query} doc ${i}`);
});
const generate = trace(async function generate(prompt, docs) {
  return { text: `answer to ${prompt} from ${docs.length} docs`, tokens: prompt.length + docs.length };
});
const handle = trace(async function handle(request) {
  const docs = await retrieve(request.question, 3);
  return generate(request.question, docs);
});

let sent = 0;
let failedCalls = 0;
let peakRss = 0;
const startedAt = Date.now();
const endAt = startedAt + minutes * 60_000;

function report(label) {
  const stats = tracing.exporter.stats();
  const rss = process.memoryUsage().rss;
  peakRss = Math.max(peakRss, rss);
  const elapsed = ((Date.now() - startedAt) / 1000).toFixed(0);
  const faults = Object.entries(proxy.faults)
    .filter(([, count]) => count > 0)
    .map(([name, count]) => `${name}:${count}`)
    .join(' ');
  console.log(
    `[${label} ${elapsed}s] sent=${sent} delivered=${stats.delivered} dropped{${formatDropped(stats.dropped)}} ` +
      `queued=${stats.queued} inFlight=${stats.inFlight} queuedBytes=${mib(stats.queuedBytes)} retried=${stats.retried} ` +
      `rss=${mib(rss)} peakRss=${mib(peakRss)} faults{${faults}}`,
  );
}

console.log(`soak: ${minutes} min, ${rate} traced requests/s (${rate * SPANS_PER_REQUEST} spans/s), seed ${seed}, server ${server.url} behind ${proxy.url}`);
proxy.startChaos();
const rssSampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 1_000);
const reporter = setInterval(() => report('soak'), REPORT_EVERY_MS);

// Paced traffic: every 10 ms, the requests due by now.
let issued = 0;
let request = 0;
await new Promise((resolve) => {
  const pacer = setInterval(() => {
    const now = Date.now();
    if (now >= endAt) {
      clearInterval(pacer);
      resolve();
      return;
    }
    const due = Math.floor(((now - startedAt) / 1000) * rate) - issued;
    for (let i = 0; i < due; i += 1) {
      issued += 1;
      request += 1;
      handle({ question: `question ${request} `.repeat(1 + (request % 8)) }).then(
        () => (sent += SPANS_PER_REQUEST),
        () => (failedCalls += 1),
      );
    }
  }, 10);
});
// Let the last requests finish (each ends its spans before resolving).
while (sent + failedCalls * SPANS_PER_REQUEST < issued * SPANS_PER_REQUEST) await new Promise((resolve) => setTimeout(resolve, 10));

// Faults off, then the final flush: every span ends delivered or counted.
await proxy.stopChaos();
report('traffic done');
await tracing.forceFlush();
const stats = tracing.exporter.stats();
report('flushed');
await tracing.shutdown();
clearInterval(reporter);
clearInterval(rssSampler);

const stored = await readBack(server.url);
await proxy.close();
await server.stop();
rmSync(dir, { recursive: true, force: true });

const dropped = droppedTotal(stats.dropped);
const duplicated = stored.lines - stored.distinct;
const lostWithoutCount = Math.max(0, sent - stored.distinct - dropped);
// Counted as dropped yet stored (a commit whose answer never arrived, then given up): not lost.
const storedDespiteDrop = Math.max(0, stored.distinct + dropped - sent);
const unaccounted = sent - stats.delivered - dropped;

console.log('--- soak result ---');
console.log(`spans sent:            ${sent}`);
console.log(`delivered (exporter):  ${stats.delivered}`);
console.log(`read back (server):    ${stored.distinct} distinct calls in ${stored.lines} rows, ${stored.withoutEnd} without an end`);
console.log(`dropped by reason:     ${formatDropped(stats.dropped)} (total ${dropped})`);
console.log(`retried requests:      ${stats.retried}, batches sent: ${stats.batchesSent}`);
console.log(`faults injected:       ${Object.entries(proxy.faults).map(([name, count]) => `${name}=${count}`).join(' ')}`);
console.log(`peak RSS (app+proxy):  ${mib(peakRss)}`);
console.log(`traced calls that threw: ${failedCalls}`);
console.log(`duplicated:            ${duplicated}`);
console.log(`lost without count:    ${lostWithoutCount}`);
console.log(`stored though dropped: ${storedDespiteDrop}`);
console.log(`unaccounted by stats:  ${unaccounted}`);

const failed = duplicated !== 0 || lostWithoutCount !== 0 || unaccounted !== 0 || stored.withoutEnd !== 0 || failedCalls !== 0;
console.log(failed ? 'SOAK FAILED' : 'SOAK OK');
process.exitCode = failed ? 1 : 0;
