/**
 * The results table: one row per SPEC §6 figure, medians with [min-max] over repetitions, the
 * ratio against the OTLP exporter, the target and whether it is met. Markdown, so the README can
 * carry it as printed.
 */

const NA = 'n/a';

function num(value, digits) {
  if (!Number.isFinite(value)) return NA;
  if (Math.abs(value) >= 10_000) return `${(value / 1000).toFixed(1)} k`;
  return value.toFixed(digits);
}

/** "median [min-max]" of one metric of one side, or n/a. */
function cell(summary, side, key, digits = 1, unit = '') {
  const s = summary?.[side]?.[key];
  if (s === undefined || s.n === 0) return NA;
  const spread = s.n > 1 ? ` [${num(s.min, digits)}-${num(s.max, digits)}]` : '';
  return `${num(s.median, digits)}${unit}${spread}`;
}

/** A count for a label: 1000000 -> "1 M", 100000 -> "100 k". */
const count = (n) => (n >= 1e6 ? `${n / 1e6} M` : n >= 1000 ? `${n / 1000} k` : String(n));

const med = (summary, side, key) => summary?.[side]?.[key]?.median ?? Number.NaN;
const max = (summary, side, key) => summary?.[side]?.[key]?.max ?? Number.NaN;
const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? `${(a / b).toFixed(2)}x` : NA);
const verdict = (ok) => (ok === undefined ? NA : ok ? 'met' : 'NOT met');

export function renderTable(results) {
  const rows = [];
  const head = '| figure | OTLP defaults | OTLP tuned | callbridge (default: worker thread) | callbridge, deliveryThread main | callbridge vs OTLP | target | verdict |';
  const rule = '|---|---|---|---|---|---|---|---|';
  const cb = results.haveCallbridge;

  const burst = results.scenarios.burst?.summary;
  if (burst) {
    const cbRate = med(burst, 'callbridge', 'spansPerSec');
    const cbLostMax = max(burst, 'callbridge', 'lost');
    rows.push(`| end-to-end spans/s, ${count(results.config.burstSpans)} spans | ${cell(burst, 'otlp', 'spansPerSec', 0)} | ${cell(burst, 'otlp-tuned', 'spansPerSec', 0)} | ${cell(burst, 'callbridge', 'spansPerSec', 0)} | ${cell(burst, 'callbridge-main', 'spansPerSec', 0)} | ${ratio(cbRate, med(burst, 'otlp-tuned', 'spansPerSec'))} of tuned | >= 1.5x, 0 lost | ${verdict(cb ? cbRate / med(burst, 'otlp-tuned', 'spansPerSec') >= 1.5 && cbLostMax === 0 : undefined)} |`);
    rows.push(`| spans lost (of ${count(results.config.burstSpans)}) | ${cell(burst, 'otlp', 'lost', 0)} (${cell(burst, 'otlp', 'lostPct', 0, ' %')}) | ${cell(burst, 'otlp-tuned', 'lost', 0)} | ${cell(burst, 'callbridge', 'lost', 0)} | ${cell(burst, 'callbridge-main', 'lost', 0)} | | 0 | ${verdict(cb ? cbLostMax === 0 : undefined)} |`);
    rows.push(`| time to make the ${count(results.config.burstSpans)} spans, the producer slowed by its exporter (ms) | ${cell(burst, 'otlp', 'produceMs', 0)} | ${cell(burst, 'otlp-tuned', 'produceMs', 0)} | ${cell(burst, 'callbridge', 'produceMs', 0)} | ${cell(burst, 'callbridge-main', 'produceMs', 0)} | | (context) | |`);
    const cbRss = med(burst, 'callbridge', 'peakRssMb');
    rows.push(`| peak RSS, ${count(results.config.burstSpans)}-span burst (MB) | ${cell(burst, 'otlp', 'peakRssMb', 0)} | ${cell(burst, 'otlp-tuned', 'peakRssMb', 0)} | ${cell(burst, 'callbridge', 'peakRssMb', 0)} | ${cell(burst, 'callbridge-main', 'peakRssMb', 0)} | ${ratio(cbRss, med(burst, 'otlp-tuned', 'peakRssMb'))} of tuned, ${ratio(cbRss, med(burst, 'otlp', 'peakRssMb'))} of defaults | <= 0.5x | ${verdict(cb ? cbRss / med(burst, 'otlp-tuned', 'peakRssMb') <= 0.5 : undefined)} |`);
    rows.push(`| RSS growth during the burst (MB) | ${growth(results, 'otlp')} | ${growth(results, 'otlp-tuned')} | ${growth(results, 'callbridge')} | ${growth(results, 'callbridge-main')} | | (context) | |`);
  }

  const cpu = results.scenarios.cpu?.summary;
  if (cpu) {
    const cbCpu = med(cpu, 'callbridge', 'cpuUsPerSpan');
    const otlpCpu = med(cpu, 'otlp', 'cpuUsPerSpan');
    rows.push(`| producer CPU µs/span at ${count(results.config.rate)} spans/s (no exporter: ${cell(cpu, 'none', 'cpuUsPerSpan', 2)}) | ${cell(cpu, 'otlp', 'cpuUsPerSpan', 2)} | ${cell(cpu, 'otlp-tuned', 'cpuUsPerSpan', 2)} | ${cell(cpu, 'callbridge', 'cpuUsPerSpan', 2)} | ${cell(cpu, 'callbridge-main', 'cpuUsPerSpan', 2)} | ${ratio(cbCpu, otlpCpu)} of defaults | <= 0.7x | ${verdict(cb ? cbCpu / otlpCpu <= 0.7 : undefined)} |`);
    rows.push(`| application thread busy µs/span (event-loop utilization; no exporter: ${cell(cpu, 'none', 'mainThreadBusyUsPerSpan', 2)}) | ${cell(cpu, 'otlp', 'mainThreadBusyUsPerSpan', 2)} | ${cell(cpu, 'otlp-tuned', 'mainThreadBusyUsPerSpan', 2)} | ${cell(cpu, 'callbridge', 'mainThreadBusyUsPerSpan', 2)} | ${cell(cpu, 'callbridge-main', 'mainThreadBusyUsPerSpan', 2)} | ${ratio(med(cpu, 'callbridge', 'mainThreadBusyUsPerSpan'), med(cpu, 'otlp', 'mainThreadBusyUsPerSpan'))} of defaults | (context) | |`);
    const byThread = (side) => {
      const parts = ['appUsPerSpan', 'sideThreadsUsPerSpan', 'helpersUsPerSpan'].map((key) => med(cpu, side, key));
      return parts.every(Number.isFinite) ? parts.map((part) => num(part, 1)).join(' / ') : NA;
    };
    rows.push(`| CPU µs/span by thread: application / the exporter's own threads / runtime helpers (no exporter: ${byThread('none')}) | ${byThread('otlp')} | ${byThread('otlp-tuned')} | ${byThread('callbridge')} | ${byThread('callbridge-main')} | | (context) | |`);
    const none = med(cpu, 'none', 'cpuUsPerSpan');
    rows.push(`| exporter's own CPU µs/span (above no exporter) | ${num(otlpCpu - none, 2)} | ${num(med(cpu, 'otlp-tuned', 'cpuUsPerSpan') - none, 2)} | ${num(cbCpu - none, 2)} | ${num(med(cpu, 'callbridge-main', 'cpuUsPerSpan') - none, 2)} | ${ratio(cbCpu - none, otlpCpu - none)} | (context) | |`);
  }

  const stall = results.scenarios.stall?.summary;
  if (stall) {
    const baseGaps = med(stall, 'none', 'busyStallsOver1ms');
    const baseP99 = med(stall, 'none', 'requestP99Ms');
    rows.push(`| longest span.end() (ms) (no exporter: ${cell(stall, 'none', 'spanEndMaxMs', 2)}) | ${cell(stall, 'otlp', 'spanEndMaxMs', 2)} | ${cell(stall, 'otlp-tuned', 'spanEndMaxMs', 2)} | ${cell(stall, 'callbridge', 'spanEndMaxMs', 2)} | ${cell(stall, 'callbridge-main', 'spanEndMaxMs', 2)} | | < 1 ms | ${verdict(cb ? max(stall, 'callbridge', 'spanEndMaxMs') < 1 : undefined)} |`);
    rows.push(`| span.end() calls over 1 ms | ${cell(stall, 'otlp', 'spanEndsOver1ms', 0)} | ${cell(stall, 'otlp-tuned', 'spanEndsOver1ms', 0)} | ${cell(stall, 'callbridge', 'spanEndsOver1ms', 0)} | ${cell(stall, 'callbridge-main', 'spanEndsOver1ms', 0)} | | 0 | ${verdict(cb ? max(stall, 'callbridge', 'spanEndsOver1ms') === 0 : undefined)} |`);
    const cbGaps = med(stall, 'callbridge', 'busyStallsOver1ms');
    rows.push(`| busy event-loop stalls over 1 ms (no exporter: ${cell(stall, 'none', 'busyStallsOver1ms', 0)}) | ${cell(stall, 'otlp', 'busyStallsOver1ms', 0)} | ${cell(stall, 'otlp-tuned', 'busyStallsOver1ms', 0)} | ${cell(stall, 'callbridge', 'busyStallsOver1ms', 0)} | ${cell(stall, 'callbridge-main', 'busyStallsOver1ms', 0)} | | no more than without exporter (+25 %) | ${verdict(cb ? cbGaps <= baseGaps * 1.25 + 5 : undefined)} |`);
    rows.push(`| worst busy stall (ms) (no exporter: ${cell(stall, 'none', 'busyStallMaxMs', 2)}) | ${cell(stall, 'otlp', 'busyStallMaxMs', 2)} | ${cell(stall, 'otlp-tuned', 'busyStallMaxMs', 2)} | ${cell(stall, 'callbridge', 'busyStallMaxMs', 2)} | ${cell(stall, 'callbridge-main', 'busyStallMaxMs', 2)} | | (context: VM noise floor) | |`);
    rows.push(`| worst event-loop delay, monitorEventLoopDelay (ms) (no exporter: ${cell(stall, 'none', 'loopDelayMaxMs', 2)}) | ${cell(stall, 'otlp', 'loopDelayMaxMs', 2)} | ${cell(stall, 'otlp-tuned', 'loopDelayMaxMs', 2)} | ${cell(stall, 'callbridge', 'loopDelayMaxMs', 2)} | ${cell(stall, 'callbridge-main', 'loopDelayMaxMs', 2)} | | (context: VM noise floor) | |`);
    const cbP99 = med(stall, 'callbridge', 'requestP99Ms');
    rows.push(`| traced request p99 (ms) (no exporter: ${cell(stall, 'none', 'requestP99Ms', 3)}) | ${cell(stall, 'otlp', 'requestP99Ms', 3)} | ${cell(stall, 'otlp-tuned', 'requestP99Ms', 3)} | ${cell(stall, 'callbridge', 'requestP99Ms', 3)} | ${cell(stall, 'callbridge-main', 'requestP99Ms', 3)} | ${ratio(cbP99, baseP99)} of no exporter | unchanged (<= 1.25x) | ${verdict(cb ? cbP99 <= baseP99 * 1.25 : undefined)} |`);
  }

  const trace = results.scenarios.trace;
  if (trace) {
    const wp = trace.withProvider?.summary;
    const np = trace.noProvider?.summary;
    const traceRatio = med(wp, 'trace', 'nsPerCall') / med(wp, 'bare', 'nsPerCall');
    rows.push(`| trace(fn) ns/call, provider registered (processor discards) | bare startActiveSpan: ${cell(wp, 'bare', 'nsPerCall', 0)} | | ${cell(wp, 'trace', 'nsPerCall', 0)} | | ${ratio(med(wp, 'trace', 'nsPerCall'), med(wp, 'bare', 'nsPerCall'))} of bare | <= 1.5x | ${verdict(cb ? traceRatio <= 1.5 : undefined)} |`);
    if (wp?.['bare-attrs'] !== undefined) {
      const bare = med(wp, 'bare', 'nsPerCall');
      rows.push(`| where it goes: bare span given trace()'s two attributes / trace() without capture | ${cell(wp, 'bare-attrs', 'nsPerCall', 0)} (${ratio(med(wp, 'bare-attrs', 'nsPerCall'), bare)} of bare) | | ${cell(wp, 'trace-nocapture', 'nsPerCall', 0)} (${ratio(med(wp, 'trace-nocapture', 'nsPerCall'), bare)} of bare) | | (context) | | |`);
    }
    rows.push(`| trace(fn) ns/call, no provider (plain call: ${cell(np, 'plain', 'nsPerCall', 0)}) | bare startActiveSpan: ${cell(np, 'bare', 'nsPerCall', 0)} | | ${cell(np, 'trace', 'nsPerCall', 0)} | | | < 1000 ns | ${verdict(cb ? med(np, 'trace', 'nsPerCall') < 1000 : undefined)} |`);
  }

  const server = results.scenarios.server;
  if (server) {
    const ingest = server.summary.ingest;
    const fmtIngest = cell({ callbridge: ingest }, 'callbridge', 'callsPerSec', 0);
    const stored = server.ingest.every((run) => run.rowsStored === run.produced);
    rows.push(`| local server ingest, calls/s (start+end) | | | ${fmtIngest}${stored ? '' : ' (rows missing!)'} | | | >= 20 k | ${verdict(ingest?.callsPerSec?.median >= 20_000 && stored)} |`);
    const lat = (name, m, limit) =>
      rows.push(`| ${name} p50 / p99 (ms) | | | ${num(m.p50Ms, 2)} / ${num(m.p99Ms, 2)}${m.failures > 0 ? ` (${m.failures} failed)` : ''} | | | p99 < ${limit} ms | ${verdict(m.p99Ms < limit && m.failures === 0)} |`);
    lat(`call/read, ${count(server.counts.calls)} calls stored`, server.callRead, 5);
    lat(`obj/read, ${count(server.counts.objects)} objects`, server.objRead, 5);
    lat(`feedback/query on payload.note, ${count(server.counts.feedback)} records`, server.feedbackQuery, 50);
  }

  const m = results.machine;
  const failed = results.failedRuns > 0 ? ` ${results.failedRuns} run(s) FAILED and are left out (see latest.json).` : '';
  const caption = `${results.quick ? 'QUICK smoke run (small counts: not the SPEC figures). ' : ''}${m.cpus} CPUs (${m.cpuModel}), Node ${m.node}; ${results.config.reps} repetition(s), median [min-max].${cb ? '' : ' callbridge was not built: its columns are n/a.'}${failed}`;
  return [caption, '', head, rule, ...rows].join('\n');
}

function growth(results, side) {
  const runs = results.scenarios.burst?.runs?.[side];
  if (!runs || runs.length === 0) return NA;
  const values = runs.map((r) => r.peakRssMb - r.rssBeforeMb).sort((a, b) => a - b);
  return num(values[Math.floor((values.length - 1) / 2)], 0);
}
