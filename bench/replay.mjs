/**
 * The local server's ingest on its own: captured `call/upsert_batch` bodies of the benchmark's
 * spans (bench/lib/upsert-capture.mjs), posted over keep-alive sockets to the server in its own
 * process on a file database, so the figure does not move when the exporter changes.
 *
 *   node bench/replay.mjs [--spans 100000] [--connections 4] [--reps 3] [--recapture] [--exporter]
 *   CALLBRIDGE_BENCH_DIST=/path/to/other/dist node bench/replay.mjs   # another build's server
 *
 * `--exporter` also runs the server scenario's ingest step (the exporter in a child process,
 * bench/scenarios/ingest.mjs) against the same server in every repetition, alternating which
 * goes first: both figures from one server, without seeding the read scenario's million calls.
 *
 * Each repetition writes the same bodies into a fresh project (`project_id` rewritten before the
 * clock starts), so every call is a new row, as in the exporter scenario. calls/s = calls / time
 * from the first request to the last answer; server CPU per call from /proc/<pid>/stat. Every
 * answer is checked: status 200 and one `res` entry per item; the rows are counted afterwards.
 * Bodies are captured once into bench/results/ and reused while `--spans` stays the same.
 */
import { mkdtempSync, rmSync, readFileSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCH_USER } from './lib/constants.mjs';
import { runChild, startDaemon } from './lib/proc.mjs';
import { openSeedDb } from './lib/seed.mjs';
import { summarize } from './lib/stats.mjs';
import { CAPTURED_PROJECT, captureUpsertBodies, readUpsertBodies } from './lib/upsert-capture.mjs';

const { values: args } = parseArgs({
  options: {
    spans: { type: 'string', default: '100000' },
    connections: { type: 'string', default: '4' },
    reps: { type: 'string', default: '3' },
    recapture: { type: 'boolean', default: false },
    exporter: { type: 'boolean', default: false },
  },
});
const spans = Number(args.spans);
const connections = Math.max(1, Number(args.connections));
const reps = Math.max(1, Number(args.reps));
const log = (line) => process.stderr.write(`${line}\n`);

const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(resultsDir, { recursive: true });
const bodiesFile = join(resultsDir, `upsert-bodies-${spans}.ndjson`);
let bodies = args.recapture ? null : readUpsertBodies(bodiesFile);
if (bodies === null) {
  log(`capturing the exporter's bodies for ${spans} spans -> ${bodiesFile}`);
  const captured = await captureUpsertBodies(bodiesFile, spans);
  log(`  ${captured.requests} requests, ${captured.calls} calls`);
  bodies = readUpsertBodies(bodiesFile);
}
const calls = bodies.reduce((sum, body) => sum + countOccurrences(body, '"mode":"end"'), 0);

const dir = mkdtempSync(join(tmpdir(), 'callbridge-replay-'));
const dbPath = join(dir, 'replay.db');
const server = await startDaemon('server-child.mjs', [dbPath]);
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const authorization = `Basic ${Buffer.from(`${BENCH_USER.username}:${BENCH_USER.password}`).toString('base64')}`;
const runs = [];
const exporterRuns = [];
try {
  for (let r = 0; r < reps; r++) {
    if (args.exporter && r % 2 === 0) exporterRuns.push(await exporterIngest(r));
    runs.push(await replay(r));
    if (args.exporter && r % 2 === 1) exporterRuns.push(await exporterIngest(r));
  }
} finally {
  agent.destroy();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
const rate = summarize(runs.map((run) => run.callsPerSec));
const cpu = summarize(runs.map((run) => run.serverCpuUsPerCall));
console.log(
  `server alone (replay, ${connections} connections, ${bodies.length} requests, ${calls} calls): ` +
    `${formatRate(rate)}, server CPU ${cpu.median.toFixed(1)} µs/call [${cpu.min.toFixed(1)}-${cpu.max.toFixed(1)}]`,
);
if (args.exporter) {
  const withExporter = summarize(exporterRuns.map((run) => run.callsPerSec));
  const exporterCpu = summarize(exporterRuns.map((run) => run.serverCpuUsPerCall));
  console.log(
    `with the exporter (${spans} spans): ${formatRate(withExporter)}, ` +
      `server CPU ${exporterCpu.median.toFixed(1)} µs/call [${exporterCpu.min.toFixed(1)}-${exporterCpu.max.toFixed(1)}]`,
  );
}
console.log(JSON.stringify({ calls, requests: bodies.length, connections, runs, exporterRuns }));

function formatRate({ median, min, max }) {
  return `${(median / 1000).toFixed(1)} k calls/s [${(min / 1000).toFixed(1)} k-${(max / 1000).toFixed(1)} k]`;
}

/** One repetition of the replay into project `bench/replay-<r>`. */
async function replay(r) {
  const projectId = `bench/replay-${r}`;
  const from = Buffer.from(`"project_id":${JSON.stringify(CAPTURED_PROJECT)}`);
  const to = Buffer.from(`"project_id":${JSON.stringify(projectId)}`);
  const repBodies = bodies.map((body) => replaceAll(body, from, to));
  const cpuBefore = processCpuMs(server.pid);
  const started = performance.now();
  let next = 0;
  const sendLoop = async () => {
    while (next < repBodies.length) await post(repBodies[next++]);
  };
  await Promise.all(Array.from({ length: connections }, sendLoop));
  const elapsedMs = performance.now() - started;
  const serverCpuMs = processCpuMs(server.pid) - cpuBefore;
  const db = openSeedDb(dbPath);
  const rowsStored = db.prepare('SELECT count(*) AS n FROM calls WHERE project_id = ? AND has_start = 1 AND ended_at IS NOT NULL').get(projectId).n;
  db.close();
  if (rowsStored !== calls) throw new Error(`${rowsStored} complete rows stored of ${calls} calls`);
  const run = { callsPerSec: calls / (elapsedMs / 1000), serverCpuUsPerCall: (serverCpuMs * 1000) / calls, elapsedMs };
  log(`  replay ${r + 1}/${reps}: ${Math.round(run.callsPerSec)} calls/s, server CPU ${run.serverCpuUsPerCall.toFixed(1)} µs/call`);
  return run;
}

/** The server scenario's ingest step (exporter in a child) into project `bench/exporter-<r>`. */
async function exporterIngest(r) {
  const projectId = `bench/exporter-${r}`;
  const cpuBefore = processCpuMs(server.pid);
  const result = await runChild('ingest', 'callbridge', { serverUrl: server.url, spans, projectId });
  const serverCpuMs = processCpuMs(server.pid) - cpuBefore;
  const db = openSeedDb(dbPath);
  const rowsStored = db.prepare('SELECT count(*) AS n FROM calls WHERE project_id = ?').get(projectId).n;
  db.close();
  if (rowsStored !== result.produced) throw new Error(`${rowsStored} rows stored of ${result.produced} spans`);
  const run = { callsPerSec: result.callsPerSec, serverCpuUsPerCall: (serverCpuMs * 1000) / result.produced };
  log(`  exporter ${r + 1}/${reps}: ${Math.round(run.callsPerSec)} calls/s, server CPU ${run.serverCpuUsPerCall.toFixed(1)} µs/call`);
  return run;
}

/** POST one body and check the answer: 200 and one `res` entry per item. */
function post(body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: new URL(server.url).port,
        path: '/call/upsert_batch',
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length, authorization },
      },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) return reject(new Error(`upsert_batch answered ${res.statusCode}: ${text.slice(0, 300)}`));
          const items = countOccurrences(body, '"mode":');
          const entries = JSON.parse(text).res?.length;
          if (entries !== items) return reject(new Error(`upsert_batch answered ${entries} entries for ${items} items`));
          resolve();
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function countOccurrences(buffer, text) {
  let count = 0;
  for (let at = buffer.indexOf(text); at !== -1; at = buffer.indexOf(text, at + text.length)) count++;
  return count;
}

function replaceAll(buffer, from, to) {
  const pieces = [];
  let at = 0;
  for (let hit = buffer.indexOf(from); hit !== -1; hit = buffer.indexOf(from, at)) {
    pieces.push(buffer.subarray(at, hit), to);
    at = hit + from.length;
  }
  pieces.push(buffer.subarray(at));
  return Buffer.concat(pieces);
}

/** User + system CPU of a process so far, in ms (Linux /proc; fields 14 and 15 in clock ticks). */
function processCpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100;
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}
