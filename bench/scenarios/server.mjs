/**
 * Scenario f: the local server, in its own process on a file database in a temp dir.
 *
 * 1. ingest: the exporter (a fresh child per repetition) sends `ingestSpans` spans to the server;
 *    calls/s = spans / time until forceFlush resolved; the rows are then counted in the DB.
 * 2. seed: the calls written in step 1 are cloned straight into SQLite up to `calls` rows in a
 *    separate project, plus `objects` objects and `feedback` feedback records (bench/lib/seed.mjs).
 * 3. latency: sequential requests over one keep-alive socket from this process:
 *    `call/read` of random seeded calls, `obj/read` of random seeded objects, and `feedback/query`
 *    with a filter on a payload path (`payload.note`, one value in 1000: a full scan).
 * This function runs in the bench's main process; it spawns the server and the ingest children.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDaemon, runChild } from '../lib/proc.mjs';
import { createJsonClient } from '../lib/http-json.mjs';
import { openSeedDb, seedCalls, seedObjects, seedFeedback } from '../lib/seed.mjs';
import { BENCH_USER } from '../lib/constants.mjs';
import { quantile } from '../lib/stats.mjs';

const READ_PROJECT = 'bench/read';

/** Latency percentiles of `count` requests made by `request(i)` after `warmup` unmeasured ones. */
async function measure(count, warmup, request) {
  const latencies = [];
  let failures = 0;
  let firstFailure;
  for (let i = 0; i < warmup + count; i++) {
    const { ok, ms, detail } = await request(i);
    if (!ok) {
      failures++;
      firstFailure ??= detail;
    }
    if (i >= warmup) latencies.push(ms);
  }
  return {
    n: latencies.length,
    p50Ms: quantile(latencies, 0.5),
    p95Ms: quantile(latencies, 0.95),
    p99Ms: quantile(latencies, 0.99),
    maxMs: Math.max(...latencies),
    failures,
    firstFailure,
  };
}

const randomIndex = (n) => Math.floor(Math.random() * n);

export async function serverScenario({ ingestSpans, repetitions, calls, objects, feedback, log }) {
  const dir = mkdtempSync(join(tmpdir(), 'callbridge-bench-'));
  const dbPath = join(dir, 'bench.db');
  const server = await startDaemon('server-child.mjs', [dbPath]);
  const client = createJsonClient(server.url, BENCH_USER);
  try {
    const ingestRuns = [];
    for (let r = 0; r < repetitions; r++) {
      const projectId = `bench/ingest-${r}`;
      const run = await runChild('ingest', 'callbridge', { serverUrl: server.url, spans: ingestSpans, projectId });
      const db = openSeedDb(dbPath);
      run.rowsStored = db.prepare('SELECT count(*) AS n FROM calls WHERE project_id = ?').get(projectId).n;
      db.close();
      log(`  ingest ${r + 1}/${repetitions}: ${Math.round(run.callsPerSec)} calls/s, ${run.rowsStored}/${run.produced} stored`);
      ingestRuns.push(run);
    }

    // Templates written by the server itself, through its API.
    const templateCall = ingestRuns.length > 0 ? 'bench/ingest-0' : undefined;
    if (templateCall === undefined) throw new Error('server scenario needs at least one ingest run');
    const created = await client.post('/obj/create', {
      obj: {
        project_id: READ_PROJECT,
        object_id: 'bench-template',
        val: { _type: 'PromptConfig', model: 'gpt-4o-mini', temperature: 0.2, system: 'You are a careful assistant.', tools: ['search', 'calculator'] },
      },
    });
    if (created.status !== 200) throw new Error(`obj/create answered ${created.status}: ${JSON.stringify(created.body)}`);
    const fb = await client.post('/feedback/create', {
      project_id: READ_PROJECT,
      weave_ref: `weave:///${READ_PROJECT}/call/${'0'.repeat(15)}1`,
      feedback_type: 'note',
      payload: { note: 'template' },
    });
    if (fb.status !== 200) throw new Error(`feedback/create answered ${fb.status}: ${JSON.stringify(fb.body)}`);

    const seedStart = performance.now();
    const db = openSeedDb(dbPath);
    const callSample = seedCalls(db, { templateProject: templateCall, projectId: READ_PROJECT, total: calls });
    const objs = seedObjects(db, { projectId: READ_PROJECT, templateObjectId: 'bench-template', count: objects });
    seedFeedback(db, { projectId: READ_PROJECT, templateId: fb.body.id, count: feedback });
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    db.close();
    const seedMs = performance.now() - seedStart;
    log(`  seeded ${calls} calls, ${objects} objects, ${feedback} feedback in ${(seedMs / 1000).toFixed(1)} s`);

    const callRead = await measure(2000, 200, async () => {
      const id = callSample[randomIndex(callSample.length)];
      const res = await client.post('/call/read', { project_id: READ_PROJECT, id });
      return { ok: res.status === 200 && res.body?.call?.id === id, ms: res.ms, detail: res.body };
    });
    const objRead = await measure(2000, 200, async () => {
      const objectId = objs.objectId(randomIndex(objects));
      const res = await client.post('/obj/read', { project_id: READ_PROJECT, object_id: objectId, digest: objs.digest });
      return { ok: res.status === 200 && res.body?.obj?.object_id === objectId, ms: res.ms, detail: res.body };
    });
    const feedbackQuery = await measure(100, 10, async (i) => {
      const note = `note-${i % 1000}`;
      const res = await client.post('/feedback/query', {
        project_id: READ_PROJECT,
        query: { $expr: { $eq: [{ $getField: 'payload.note' }, { $literal: note }] } },
      });
      const rows = res.body?.result;
      return { ok: res.status === 200 && Array.isArray(rows) && rows.length === Math.ceil((feedback - (i % 1000)) / 1000), ms: res.ms, detail: rows?.length ?? res.body };
    });
    return { ingest: ingestRuns, seedMs, counts: { calls, objects, feedback }, callRead, objRead, feedbackQuery };
  } finally {
    client.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
