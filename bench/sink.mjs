/**
 * The sink every side exports to: a separate process on 127.0.0.1 that reads each request body
 * fully, counts the spans in it and answers like the real receiver would.
 *
 *   POST /v1/traces                          OTLP JSON; spans = resourceSpans[].scopeSpans[].spans[]  -> {}
 *   POST /call/upsert_batch                  spans = `end` items (one per span)       -> {"res": [one per item]}
 *   POST /v2/{entity}/{project}/calls/complete  spans = batch length                  -> {}
 *   GET  /stats                              counters as JSON;  POST /reset  zeroes them
 *
 * Counting: a full JSON.parse costs about 8 µs per OTLP span here (~160 MB/s), which at 60 k
 * spans/s is half a core taken from a 2-core machine that also runs the producer. So by default
 * the sink counts by scanning the raw bytes for a marker that occurs once per span (`"spanId":`,
 * `"mode":"end"`, `"ended_at":`; ~0.7 µs per span, ~1.9 GB/s) and verifies the scan against a full
 * parse on every `--verify-every`-th request (default 8, and always the first); a mismatch is
 * counted in `mismatches` (the bench reports it as an error) and the parsed count is used.
 * `--parse full` parses every body instead.
 *
 * Usage: node bench/sink.mjs [--parse scan|full] [--verify-every N] [--standalone]
 * Prints one line `{"port": N, "url": "http://127.0.0.1:N"}` once listening.
 */
import http from 'node:http';
import zlib from 'node:zlib';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    parse: { type: 'string', default: 'scan' },
    'verify-every': { type: 'string', default: '8' },
    standalone: { type: 'boolean', default: false },
  },
});
const fullParse = args.parse === 'full';
const verifyEvery = Math.max(1, Number(args['verify-every']) || 8);

const SPAN_ID_MARK = Buffer.from('"spanId":');
const START_MARK = Buffer.from('"mode":"start"');
const END_MARK = Buffer.from('"mode":"end"');
const ENDED_AT_MARK = Buffer.from('"ended_at":');
const COMPLETE_PATH = /^\/v2\/[^/]+\/[^/]+\/calls\/complete$/;

const now = () => performance.timeOrigin + performance.now();

let stats = freshStats();
function freshStats() {
  return {
    spans: 0,
    items: 0,
    requests: 0,
    bytes: 0,
    inflight: 0,
    verified: 0,
    mismatches: 0,
    rejected: 0,
    firstAt: 0,
    lastAt: 0,
    paths: {},
    cpuAtReset: process.cpuUsage(),
  };
}

function countMarks(body, mark) {
  let count = 0;
  for (let at = body.indexOf(mark); at !== -1; at = body.indexOf(mark, at + mark.length)) count++;
  return count;
}

function countOtlpParsed(doc) {
  let count = 0;
  for (const resource of doc.resourceSpans ?? []) {
    for (const scope of resource.scopeSpans ?? []) count += scope.spans?.length ?? 0;
  }
  return count;
}

/** How each path is counted: the marker scan, the exact count from a parsed body, and the answer. */
const HANDLERS = {
  otlp: {
    scan: (body) => ({ spans: countMarks(body, SPAN_ID_MARK), starts: 0 }),
    parsed: (doc) => ({ spans: countOtlpParsed(doc), starts: 0 }),
    answer: () => '{}',
  },
  upsert: {
    scan: (body) => ({ spans: countMarks(body, END_MARK), starts: countMarks(body, START_MARK) }),
    parsed: (doc) => {
      let spans = 0;
      let starts = 0;
      for (const item of doc.batch) {
        if (item.mode === 'end') spans++;
        else if (item.mode === 'start') starts++;
      }
      return { spans, starts };
    },
    // One entry per item as the service answers; the sink does not keep the ids a start would
    // echo (the exporter's path is the same whichever they are), so every entry is `{}`.
    answer: (count) => `{"res":[${new Array(count.spans + count.starts).fill('{}').join(',')}]}`,
  },
  complete: {
    scan: (body) => ({ spans: countMarks(body, ENDED_AT_MARK), starts: 0 }),
    parsed: (doc) => ({ spans: doc.batch.length, starts: 0 }),
    answer: () => '{}',
  },
};

function handlerFor(path) {
  if (path === '/v1/traces') return HANDLERS.otlp;
  if (path === '/call/upsert_batch') return HANDLERS.upsert;
  if (COMPLETE_PATH.test(path)) return HANDLERS.complete;
  return undefined;
}

function reply(res, status, text) {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function ingest(req, res, handler, raw) {
  const body = req.headers['content-encoding'] === 'gzip' ? zlib.gunzipSync(raw) : raw;
  const requestNo = stats.requests + 1;
  let count;
  if (fullParse || requestNo === 1 || requestNo % verifyEvery === 0) {
    let doc;
    try {
      doc = JSON.parse(body.toString('utf8'));
    } catch {
      stats.rejected++;
      reply(res, 400, '{"reason":"body is not JSON"}');
      return;
    }
    count = handler.parsed(doc);
    stats.verified++;
    if (!fullParse) {
      const scanned = handler.scan(body);
      if (scanned.spans !== count.spans || scanned.starts !== count.starts) stats.mismatches++;
    }
  } else {
    count = handler.scan(body);
  }
  stats.requests = requestNo;
  stats.bytes += raw.length;
  stats.spans += count.spans;
  stats.items += count.spans + count.starts;
  stats.paths[req.url] = (stats.paths[req.url] ?? 0) + 1;
  const at = now();
  if (stats.firstAt === 0) stats.firstAt = at;
  stats.lastAt = at;
  reply(res, 200, handler.answer(count));
}

const server = http.createServer((req, res) => {
  const path = req.url ?? '/';
  if (req.method === 'GET' && path === '/stats') {
    const cpu = process.cpuUsage(stats.cpuAtReset);
    const { cpuAtReset: _ignored, ...counters } = stats;
    reply(res, 200, JSON.stringify({ ...counters, cpuMs: (cpu.user + cpu.system) / 1000, parse: fullParse ? 'full' : 'scan' }));
    return;
  }
  if (req.method === 'POST' && path === '/reset') {
    req.resume();
    stats = freshStats();
    reply(res, 200, '{}');
    return;
  }
  const handler = req.method === 'POST' ? handlerFor(path) : undefined;
  if (handler === undefined) {
    req.resume();
    reply(res, 404, '{"reason":"not found"}');
    return;
  }
  stats.inflight++;
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    stats.inflight--;
    ingest(req, res, handler, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
  });
  req.on('error', () => {
    stats.inflight--;
  });
});
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;
server.requestTimeout = 0;

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  process.stdout.write(`${JSON.stringify({ port, url: `http://127.0.0.1:${port}` })}\n`);
});

// The bench closes our stdin when it is done with us; stop then so no orphan is left behind.
// `--standalone` (a sink started by hand) runs until SIGTERM/SIGINT instead.
if (!args.standalone) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}
process.on('SIGINT', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
