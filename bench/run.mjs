/**
 * callbridge side by side with the official OTLP/HTTP exporter (SPEC §6).
 *
 *   node bench/run.mjs [throughput] [cpu] [stall] [rss] [trace] [server] [--quick] [--reps N] [--full-parse]
 *
 * No scenario named = all. Every run of every side is a fresh child process (bench/child.mjs);
 * sides alternate within a repetition (and the order flips every repetition) so drift on this
 * shared machine does not favour one side. Prints a markdown table with medians, [min-max] and
 * the SPEC §6 target, and writes everything to bench/results/latest.json (latest-quick.json
 * for --quick).
 * `throughput` and `rss` are measured in the same burst runs; either flag runs them.
 * `--full-parse` makes the sink JSON.parse every body instead of scanning (slower sink).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startDaemon, runChild } from './lib/proc.mjs';
import { summarize } from './lib/stats.mjs';
import { serverScenario } from './scenarios/server.mjs';
import { renderTable } from './report.mjs';
import { hasDist, importCallbridge, snapshotDist } from './lib/dist.mjs';

const ALL = ['throughput', 'cpu', 'stall', 'rss', 'trace', 'server'];

const USAGE = `usage: node bench/run.mjs [${ALL.join('] [')}] [--quick] [--reps N] [--full-parse]
  no scenario named runs them all; --quick is a small smoke run, not the SPEC figures`;

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      quick: { type: 'boolean', default: false },
      reps: { type: 'string' },
      'full-parse': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
} catch (error) {
  console.error(`${error.message}\n${USAGE}`);
  process.exit(2);
}
const { values: flags, positionals } = parsed;
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}
for (const name of positionals) {
  if (!ALL.includes(name)) {
    console.error(`unknown scenario "${name}"; choose from ${ALL.join(', ')}`);
    process.exit(2);
  }
}
const selected = new Set(positionals.length > 0 ? positionals : ALL);

const CONFIG = flags.quick
  ? { reps: 1, burstSpans: 20_000, rate: 20_000, pacedMs: 2000, traceCalls: 50_000, traceRounds: 3,
      ingestSpans: 10_000, ingestReps: 1, calls: 20_000, objects: 2_000, feedback: 10_000 }
  : { reps: 3, burstSpans: 200_000, rate: 20_000, pacedMs: 5000, traceCalls: 200_000, traceRounds: 7,
      ingestSpans: 100_000, ingestReps: 3, calls: 1_000_000, objects: 100_000, feedback: 100_000 };
if (flags.reps !== undefined) CONFIG.reps = Math.max(1, Number(flags.reps));

// Benchmark one consistent build: `npm run build` elsewhere (it cleans dist/ first) must not
// pull the package out from under a run that takes minutes. Children inherit the env var.
const snapshot = snapshotDist(fileURLToPath(new URL('./results/.dist-snapshot/', import.meta.url)));
if (snapshot !== undefined) process.env.CALLBRIDGE_BENCH_DIST = snapshot;

const haveCallbridge = hasDist('index.js') && (await importCallbridge().then((m) => typeof m.register === 'function' && typeof m.trace === 'function', () => false));
const haveServer = hasDist('server/index.js');
const EXPORT_SIDES = ['otlp', 'otlp-tuned', ...(haveCallbridge ? ['callbridge', 'callbridge-main'] : [])];

const log = (line) => process.stderr.write(`${line}\n`);

function machine() {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  return {
    cpus: os.availableParallelism(),
    cpuModel: /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? 'unknown',
    memGb: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    loadAvgAtStart: os.loadavg(),
  };
}

/** Run `scenario` for every side, `reps` times, alternating sides; collect results per side. */
async function repeat(scenario, sides, options, reps) {
  const runs = Object.fromEntries(sides.map((side) => [side, []]));
  for (let r = 0; r < reps; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) {
      try {
        const result = await runChild(scenario, side, options);
        log(`  ${scenario} ${side} #${r + 1}: ${brief(scenario, result)}`);
        runs[side].push(result);
      } catch (error) {
        // One broken run must not cost the others; it is kept, and shown, as an error.
        log(`  ${scenario} ${side} #${r + 1}: FAILED ${error.message}`);
        runs[side].push({ error: error.message });
      }
    }
  }
  return runs;
}

function brief(scenario, r) {
  switch (scenario) {
    case 'burst':
      return `${Math.round(r.spansPerSec)} spans/s, lost ${r.lost}, peak RSS ${Math.round(r.peakRssMb)} MB`;
    case 'cpu':
      return `${r.cpuUsPerSpan.toFixed(2)} µs/span`;
    case 'stall':
      return `span.end max ${r.spanEndMaxMs.toFixed(2)} ms, busy stall max ${r.busyStallMaxMs.toFixed(2)} ms, request p99 ${r.requestP99Ms.toFixed(3)} ms`;
    case 'traceOverhead':
      return `${r.nsPerCall.toFixed(0)} ns/call`;
    default:
      return '';
  }
}

/** Per side: `{ metric: {median, min, max, n} }` for each numeric metric of the runs. */
function summarizeRuns(runsBySide) {
  const out = {};
  for (const [side, runs] of Object.entries(runsBySide)) {
    out[side] = {};
    const keys = new Set(runs.flatMap((run) => Object.keys(run)));
    for (const key of keys) {
      const values = runs.map((run) => run[key]);
      if (values.every((v) => typeof v === 'number')) out[side][key] = summarize(values);
    }
  }
  return out;
}

const results = { startedAt: new Date().toISOString(), quick: flags.quick, config: CONFIG, machine: machine(), sides: EXPORT_SIDES, haveCallbridge, haveServer, scenarios: {} };
if (!haveCallbridge) log('dist/index.js has no register(): callbridge figures are skipped (run `npm run build`).');

const needsSink = ['throughput', 'rss', 'cpu', 'stall'].some((name) => selected.has(name));
const sink = needsSink ? await startDaemon('sink.mjs', flags['full-parse'] ? ['--parse', 'full'] : []) : undefined;
try {
  if (selected.has('throughput') || selected.has('rss')) {
    log(`burst: ${CONFIG.burstSpans} spans flat out, ${CONFIG.reps} repetitions`);
    const runs = await repeat('burst', EXPORT_SIDES, { sinkUrl: sink.url, spans: CONFIG.burstSpans }, CONFIG.reps);
    results.scenarios.burst = { runs, summary: summarizeRuns(runs) };
  }
  if (selected.has('cpu')) {
    log(`cpu: ${CONFIG.rate} spans/s for ${CONFIG.pacedMs} ms`);
    const runs = await repeat('cpu', ['none', ...EXPORT_SIDES], { sinkUrl: sink.url, rate: CONFIG.rate, durationMs: CONFIG.pacedMs }, CONFIG.reps);
    results.scenarios.cpu = { runs, summary: summarizeRuns(runs) };
  }
  if (selected.has('stall')) {
    log(`stall: ${CONFIG.rate} spans/s for ${CONFIG.pacedMs} ms with a traced request loop`);
    const runs = await repeat('stall', ['none', ...EXPORT_SIDES], { sinkUrl: sink.url, rate: CONFIG.rate, durationMs: CONFIG.pacedMs }, CONFIG.reps);
    results.scenarios.stall = { runs, summary: summarizeRuns(runs) };
  }
  if (selected.has('trace')) {
    log(`trace(): ${CONFIG.traceCalls} calls x ${CONFIG.traceRounds} rounds`);
    const variants = ['plain', 'bare', ...(haveCallbridge ? ['trace'] : [])];
    // Where trace()'s time goes, with a provider only (see scenarios/trace-overhead.mjs).
    const contextVariants = ['bare-attrs', ...(haveCallbridge ? ['trace-nocapture'] : [])];
    const scenario = {};
    for (const provider of [true, false]) {
      const runs = await repeat('traceOverhead', provider ? [...variants, ...contextVariants] : variants, { provider, calls: CONFIG.traceCalls, rounds: CONFIG.traceRounds }, CONFIG.reps);
      scenario[provider ? 'withProvider' : 'noProvider'] = { runs, summary: summarizeRuns(runs) };
    }
    results.scenarios.trace = scenario;
  }
} finally {
  await sink?.stop();
}

if (selected.has('server')) {
  if (!haveServer || !haveCallbridge) {
    log('server: skipped (needs dist/server/index.js and dist/index.js; run `npm run build`)');
  } else {
    log(`server: ingest ${CONFIG.ingestSpans} spans x ${CONFIG.ingestReps}; reads over ${CONFIG.calls} calls`);
    results.scenarios.server = await serverScenario({
      ingestSpans: CONFIG.ingestSpans,
      repetitions: CONFIG.ingestReps,
      calls: CONFIG.calls,
      objects: CONFIG.objects,
      feedback: CONFIG.feedback,
      log,
    });
    results.scenarios.server.summary = { ingest: summarizeRuns({ callbridge: results.scenarios.server.ingest }).callbridge };
  }
}

// The sink counts by scanning and checks itself against full parses (bench/sink.mjs).
const burstRuns = Object.values(results.scenarios.burst?.runs ?? {}).flat();
results.sinkMismatches = burstRuns.reduce((sum, run) => sum + (run.mismatches ?? 0), 0);
if (results.sinkMismatches > 0) log(`WARNING: the sink's marker scan disagreed with a full parse ${results.sinkMismatches} times; spans/s may be off.`);
const allRuns = [results.scenarios.burst, results.scenarios.cpu, results.scenarios.stall, results.scenarios.trace?.withProvider, results.scenarios.trace?.noProvider]
  .flatMap((scenario) => Object.values(scenario?.runs ?? {}).flat());
results.failedRuns = allRuns.filter((run) => run.error !== undefined).length;
results.finishedAt = new Date().toISOString();
const table = renderTable(results);
results.table = table;
const outDir = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(outDir, { recursive: true });
// A smoke run must not overwrite the figures of the last full run.
const outName = flags.quick ? 'latest-quick.json' : 'latest.json';
writeFileSync(`${outDir}${outName}`, `${JSON.stringify(results, null, 2)}\n`);
process.stdout.write(`\n${table}\n\nraw numbers: bench/results/${outName}\n`);
