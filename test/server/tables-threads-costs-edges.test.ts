/**
 * Tables, threads and token costs of the local server, over real sockets, held to the hosted
 * service's rules where SPEC is silent (weave/trace_server/clickhouse_trace_server_batched.py,
 * threads_query_builder.py, token_costs.py, costs/cost_checkpoint.json): table and row digests
 * of Python's number spellings, `table/update` and `table/query` and `threads/stream_query`
 * driven with seeded random requests and compared with a small model of the service's rules
 * written here, and `include_costs` (price ranks, snapshot prices, `requests` as counted).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server.close());

const call = (path: string, body: unknown) => post(server.url, path, body);
const TRACE = 'abcdef0123456789abcdef0123456789';

/** The service's row digest of a row's Python `json.dumps(row, sort_keys=True)` text. */
const rowDigest = (pythonText: string) => createHash('sha256').update(pythonText).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y');
/** The service's table digest: hex SHA-256 of the row digests concatenated. */
const tableDigest = (rowDigests: readonly string[]) => createHash('sha256').update(rowDigests.join('')).digest('hex');

/** A small seeded generator, so a failing differential run is the same run again. */
function seeded(seed: number) {
  let state = seed;
  const next = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
  return { next, pick: <T,>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T };
}

/** Canonical UTC text with microseconds of an instant given in microseconds since 1970. */
const isoMicros = (us: number) => new Date(Math.floor(us / 1000)).toISOString().slice(0, -1) + String(us % 1000).padStart(3, '0') + 'Z';

let nextCallId = 0;
const newCallId = () => (0x5000 + ++nextCallId).toString(16).padStart(16, '0');
const startItem = (project: string, id: string, startedAt: string, extra: Record<string, unknown> = {}) => ({
  mode: 'start',
  req: { start: { project_id: project, id, trace_id: TRACE, op_name: 'op', started_at: startedAt, attributes: {}, inputs: {}, ...extra } },
});
const endItem = (project: string, id: string, endedAt: string, summary: Record<string, unknown> = {}) => ({
  mode: 'end',
  req: { end: { project_id: project, id, ended_at: endedAt, summary } },
});

describe('table digests', () => {
  // [row as sent, what CPython's json.dumps(json.loads(row), sort_keys=True) prints].
  const vectors: Array<[string, string]> = [
    ['{"a": 1E5}', '{"a": 100000.0}'],
    ['{"a": 1e+2}', '{"a": 100.0}'],
    ['{"a": -0.0}', '{"a": -0.0}'],
    ['{"a": 0e0}', '{"a": 0.0}'],
    ['{"a": 1e16}', '{"a": 1e+16}'],
    ['{"a": 1e15}', '{"a": 1000000000000000.0}'],
    ['{"a": 123456789012345678901234567890.5}', '{"a": 1.2345678901234568e+29}'],
    ['{"a": 5e-324}', '{"a": 5e-324}'],
    ['{"a": 1.7976931348623157e308}', '{"a": 1.7976931348623157e+308}'],
    ['{"a": 1e-7}', '{"a": 1e-07}'],
    ['{"a": 0.0001}', '{"a": 0.0001}'],
    ['{"a": 1e21}', '{"a": 1e+21}'],
    ['{"a": 100000000000000000000000}', '{"a": 100000000000000000000000}'],
    ['{"a": -12345678901234567890}', '{"a": -12345678901234567890}'],
    ['{"a": 9007199254740993.0}', '{"a": 9007199254740992.0}'],
    ['{"a": 1e-320}', '{"a": 1e-320}'],
    ['{"a": 123e-2}', '{"a": 1.23}'],
    ['{"a": 0.000001234}', '{"a": 1.234e-06}'],
    ['{"a": 12345678901234567.0}', '{"a": 1.2345678901234568e+16}'],
    ['{"a": -1e-400}', '{"a": -0.0}'],
    ['{"\\u0000": 1, "": 2}', '{"": 2, "\\u0000": 1}'],
    ['{"a": "\\ud800"}', '{"a": "\\ud800"}'],
    ['{"a": "\\udc00\\ud800"}', '{"a": "\\udc00\\ud800"}'],
    ['{"a": "\\u007f\\u0000\\u001f/"}', '{"a": "\\u007f\\u0000\\u001f/"}'],
    ['{"z": 1, "Z": 2, "é": 3, "e\\u0301": 4}', '{"Z": 2, "e\\u0301": 4, "z": 1, "\\u00e9": 3}'],
    ['{"a": [1, {"c": 1, "b": [true, false, null]}]}', '{"a": [1, {"b": [true, false, null], "c": 1}]}'],
    ['{"a"   :\t1\n,\r"b":2}', '{"a": 1, "b": 2}'],
  ];

  it('digests rows as Python prints them, the same through create, append and insert', async () => {
    const project = 'acme/edges-digests';
    const empty = (await call('/table/create', { table: { project_id: project, rows: [] } })).body.digest as string;
    expect(empty).toBe(tableDigest([]));
    for (const [sent, python] of vectors) {
      const created = await call('/table/create', `{"table":{"project_id":"${project}","rows":[${sent}, ${sent}]}}`);
      expect(created.status, `${sent}: ${created.text}`).toBe(200);
      expect(created.body.row_digests, sent).toEqual([rowDigest(python), rowDigest(python)]);
      expect(created.body.digest, sent).toBe(tableDigest([rowDigest(python), rowDigest(python)]));
      const updated = await call(
        '/table/update',
        `{"project_id":"${project}","base_digest":"${empty}","updates":[{"append":{"row":${sent}}},{"insert":{"index":0,"row":${sent}}}]}`,
      );
      expect(updated.status, `${sent}: ${updated.text}`).toBe(200);
      expect(updated.body.updated_row_digests, sent).toEqual([rowDigest(python), rowDigest(python)]);
      expect(updated.body.digest).toBe(created.body.digest);
    }
  });
});

describe('table/update, differential', () => {
  it('applies random appends, pops and inserts as the service does; a bad index is a 400 that stores nothing', async () => {
    const project = 'acme/edges-updates';
    const random = seeded(99);
    let rows = [1, 2, 3];
    const text = (k: number) => `{"k": ${k}}`;
    let digest = (await call('/table/create', { table: { project_id: project, rows: rows.map((k) => ({ k })) } })).body.digest as string;
    for (let round = 0; round < 60; round++) {
      const updates: unknown[] = [];
      const next = [...rows];
      const touched: string[] = [];
      let valid = true;
      for (let i = 0, n = 1 + Math.floor(random.next() * 4); i < n; i++) {
        const kind = random.next();
        const k = Math.floor(random.next() * 6);
        if (kind < 0.35) {
          updates.push({ append: { row: { k } } });
          next.push(k);
          touched.push(rowDigest(text(k)));
        } else if (kind < 0.7) {
          // Indexes from -1 to one past the end: the service refuses < 0 and >= length.
          const index = Math.floor(random.next() * (next.length + 2)) - 1;
          updates.push({ pop: { index } });
          if (index < 0 || index >= next.length) valid = false;
          else touched.push(rowDigest(text(next.splice(index, 1)[0] as number)));
        } else {
          // The service refuses < 0 and > length.
          const index = Math.floor(random.next() * (next.length + 3)) - 1;
          updates.push({ insert: { index, row: { k } } });
          if (index < 0 || index > next.length) valid = false;
          else {
            next.splice(index, 0, k);
            touched.push(rowDigest(text(k)));
          }
        }
      }
      const res = await call('/table/update', { project_id: project, base_digest: digest, updates });
      if (!valid) {
        expect(res.status, JSON.stringify(updates)).toBe(400);
        continue;
      }
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ digest: tableDigest(next.map((k) => rowDigest(text(k)))), updated_row_digests: touched });
      rows = next;
      digest = res.body.digest;
      const read = await call('/table/query', { project_id: project, digest });
      expect(read.body.rows.map((row: { val: { k: number } }) => row.val.k)).toEqual(rows);
      const stats = await call('/table/query_stats_batch', { project_id: project, digests: [digest, digest], include_storage_size: true });
      expect(stats.body.tables).toEqual([{ digest, count: rows.length, storage_size_bytes: rows.length * text(0).length }]);
    }
  });
});

describe('table/query, differential', () => {
  it('filters by row digest, sorts (absent and null last, numbers, then text) and pages as the service does', async () => {
    const project = 'acme/edges-query';
    const random = seeded(777);
    const NUMERIC_TEXT = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
    const values: unknown[] = [undefined, null, 1, 2, -3, 2.5, 10, 'a', 'B', 'b', '10', '9', ' 5', '1e1', '', true, false, { x: 1 }, [1], 'zz', 7, 'é'];
    const valueAt = (row: unknown, path: string): unknown =>
      path.split('.').reduce<unknown>((value, part) => {
        if (Array.isArray(value)) return /^\d+$/.test(part) ? value[Number(part)] : undefined;
        return value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[part] : undefined;
      }, row);
    // The service's OrderField on a JSON path: present first, then toFloat64OrNull, then JSON_VALUE text.
    const keyOf = (value: unknown) => ({
      absent: value === undefined || value === null ? 1 : 0,
      num: typeof value === 'number' ? value : typeof value === 'string' && NUMERIC_TEXT.test(value) ? Number(value) : null,
      text:
        typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' || value === null ? JSON.stringify(value) : '',
    });
    for (let round = 0; round < 5; round++) {
      const rows = Array.from({ length: 25 }, (_, i) => {
        const row: Record<string, unknown> = { i: i % 7 };
        const v = random.pick(values);
        if (v !== undefined) row.v = v;
        if (random.next() < 0.5) row.w = { u: random.pick(values) };
        return row;
      });
      const created = await call('/table/create', { table: { project_id: project, rows } });
      expect(created.status).toBe(200);
      const digests = created.body.row_digests as string[];
      for (let q = 0; q < 60; q++) {
        const sort_by =
          random.next() < 0.3
            ? undefined
            : Array.from({ length: 1 + Math.floor(random.next() * 2) }, () => ({
                field: random.pick(['v', 'i', 'w.u', 'v.x', 'v.0']),
                direction: random.pick(['asc', 'desc'] as const),
              }));
        const row_digests = random.next() < 0.3 ? digests.filter(() => random.next() < 0.3) : undefined;
        const limit = random.next() < 0.5 ? Math.floor(random.next() * 6) : undefined;
        const offset = random.next() < 0.5 ? Math.floor(random.next() * 30) : undefined;
        const req = { project_id: project, digest: created.body.digest, sort_by, limit, offset, filter: row_digests ? { row_digests } : undefined };
        const res = await call('/table/query', req);
        expect(res.status, res.text).toBe(200);
        let model = rows.map((row, index) => ({ row, index, digest: digests[index] as string }));
        if (row_digests !== undefined && row_digests.length > 0) model = model.filter((m) => row_digests.includes(m.digest));
        model.sort((a, b) => {
          for (const sort of sort_by ?? []) {
            const ka = keyOf(valueAt(a.row, sort.field));
            const kb = keyOf(valueAt(b.row, sort.field));
            const direction = sort.direction === 'asc' ? 1 : -1;
            if (ka.absent !== kb.absent) return ka.absent - kb.absent;
            if (ka.num !== kb.num) {
              if (ka.num === null) return 1;
              if (kb.num === null) return -1;
              return (ka.num - kb.num) * direction;
            }
            const byText = Buffer.compare(Buffer.from(ka.text), Buffer.from(kb.text));
            if (byText !== 0) return byText * direction;
          }
          return a.index - b.index;
        });
        model = model.slice(offset ?? 0, limit === undefined ? undefined : (offset ?? 0) + limit);
        const got = res.body.rows as Array<{ original_index: number; digest: string }>;
        expect(got.map((row) => [row.original_index, row.digest]), JSON.stringify(req)).toEqual(model.map((m) => [m.index, m.digest]));
      }
    }
  });

  it('answers 0 rows for a table that does not exist, and each asked table once in stats', async () => {
    const project = 'acme/edges-stats';
    const missing = 'f'.repeat(64);
    expect((await call('/table/query_stats', { project_id: project, digest: missing })).body).toEqual({ count: 0 });
    expect((await call('/table/query', { project_id: project, digest: missing })).body).toEqual({ rows: [] });
    const t = (await call('/table/create', { table: { project_id: project, rows: [{ a: 1 }, { a: 1 }] } })).body;
    const stats = await call('/table/query_stats_batch', { project_id: project, digests: [missing, t.digest, t.digest] });
    expect(stats.body).toEqual({ tables: [{ digest: t.digest, count: 2, storage_size_bytes: null }] });
    // The same row twice: both positions come back, also when filtered by its digest.
    const filtered = await call('/table/query', { project_id: project, digest: t.digest, filter: { row_digests: [t.row_digests[0]] } });
    expect(filtered.body.rows.map((row: { original_index: number }) => row.original_index)).toEqual([0, 1]);
  });
});

describe('threads/stream_query, differential', () => {
  interface Turn {
    id: string;
    thread: string;
    startUs: number;
    endUs: number | null;
    isTurn: boolean;
    deleted: boolean;
  }

  it('sums threads up over their turns, filters, sorts and pages as the service does', async () => {
    const random = seeded(12345);
    const fields = ['thread_id', 'turn_count', 'start_time', 'last_updated', 'p50_turn_duration_ms', 'p99_turn_duration_ms'] as const;
    const base = Date.UTC(2026, 0, 1) * 1000;
    for (let round = 0; round < 6; round++) {
      const project = `acme/edges-threads-${round}`;
      const turns: Turn[] = Array.from({ length: 60 }, (): Turn => {
        const startUs = base + Math.floor(random.next() * 20) * 1_000_000 + random.pick([0, 0, 500, 123_456]);
        const endUs = random.next() < 0.2 ? null : startUs + Math.floor(random.next() * 5) * 1000 + random.pick([0, 0, 250, 999_999]);
        return { id: newCallId(), thread: random.pick(['a', 'b', 'c', 'd', 'e', '']), startUs, endUs, isTurn: random.next() < 0.85, deleted: random.next() < 0.1 };
      });
      const batch = turns.flatMap((t) => [
        // A non-turn call in a thread carries another call's turn_id, as withThread's children do.
        startItem(project, t.id, isoMicros(t.startUs), { thread_id: t.thread, turn_id: t.isTurn ? t.id : '00000000000000ff' }),
        ...(t.endUs === null ? [] : [endItem(project, t.id, isoMicros(t.endUs))]),
      ]);
      expect((await call('/call/upsert_batch', { batch })).status).toBe(200);
      const deleted = turns.filter((t) => t.deleted).map((t) => t.id);
      if (deleted.length > 0) expect((await call('/calls/delete', { project_id: project, call_ids: deleted })).status).toBe(200);

      for (let q = 0; q < 40; q++) {
        const sort_by =
          random.next() < 0.3
            ? undefined
            : Array.from({ length: 1 + Math.floor(random.next() * 2) }, () => ({ field: random.pick(fields), direction: random.pick(['asc', 'desc'] as const) }));
        const thread_ids = random.next() < 0.3 ? ['a', 'c', ''].filter(() => random.next() < 0.6) : undefined;
        const after = random.next() < 0.3 ? isoMicros(base + Math.floor(random.next() * 20) * 1_000_000) : undefined;
        const before = random.next() < 0.3 ? isoMicros(base + Math.floor(random.next() * 20) * 1_000_000 + 500) : undefined;
        const limit = random.next() < 0.5 ? Math.floor(random.next() * 4) : undefined;
        const offset = random.next() < 0.5 ? Math.floor(random.next() * 4) : undefined;
        const req = { project_id: project, sort_by, limit, offset, filter: { thread_ids, after_datetime: after, before_datetime: before } };
        const res = await call('/threads/stream_query', req);
        expect(res.status, res.text).toBe(200);
        const got = res.text.split('\n').filter(Boolean).map((line) => JSON.parse(line));

        const selected = turns.filter(
          (t) =>
            t.isTurn &&
            !t.deleted &&
            (thread_ids !== undefined && thread_ids.length > 0 ? thread_ids.includes(t.thread) : t.thread !== '') &&
            (after === undefined || isoMicros(t.startUs) > after) &&
            (before === undefined || isoMicros(t.startUs) < before),
        );
        const byThread = new Map<string, Turn[]>();
        for (const t of selected) byThread.set(t.thread, [...(byThread.get(t.thread) ?? []), t]);
        const quantile = (durations: number[], level: number) => {
          const sorted = [...durations].sort((x, y) => x - y);
          const at = (sorted.length - 1) * level;
          const low = Math.floor(at);
          const high = Math.min(low + 1, sorted.length - 1);
          return (sorted[low] as number) + ((sorted[high] as number) - (sorted[low] as number)) * (at - low);
        };
        let expected = [...byThread.entries()]
          .filter(([, ts]) => ts.some((t) => t.endUs !== null))
          .map(([thread, ts]) => {
            const ended = ts.filter((t) => t.endUs !== null);
            const first = [...ts].sort((x, y) => x.startUs - y.startUs || (x.id < y.id ? -1 : 1))[0] as Turn;
            const last = [...ended].sort((x, y) => (y.endUs as number) - (x.endUs as number) || (x.id < y.id ? -1 : 1))[0] as Turn;
            const durations = ended.map((t) => Math.floor((t.endUs as number) / 1000) - Math.floor(t.startUs / 1000));
            return {
              thread_id: thread,
              turn_count: ts.length,
              start_time: isoMicros(Math.min(...ts.map((t) => t.startUs))),
              last_updated: isoMicros(Math.max(...ended.map((t) => t.endUs as number))),
              first_turn_id: first.id,
              last_turn_id: last.id,
              p50_turn_duration_ms: quantile(durations, 0.5),
              p99_turn_duration_ms: quantile(durations, 0.99),
            };
          });
        const keys = sort_by ?? [{ field: 'last_updated', direction: 'desc' }];
        expected.sort((x, y) => {
          for (const key of keys) {
            const a = (x as Record<string, unknown>)[key.field] as number | string;
            const b = (y as Record<string, unknown>)[key.field] as number | string;
            if (a !== b) return (a < b ? -1 : 1) * (key.direction === 'asc' ? 1 : -1);
          }
          return x.thread_id < y.thread_id ? -1 : x.thread_id > y.thread_id ? 1 : 0;
        });
        expected = expected.slice(offset ?? 0, limit === undefined ? undefined : (offset ?? 0) + limit);
        const rounded = (threads: Array<Record<string, unknown>>) =>
          threads.map((t) => ({
            ...t,
            p50_turn_duration_ms: Math.round((t.p50_turn_duration_ms as number) * 1e6) / 1e6,
            p99_turn_duration_ms: Math.round((t.p99_turn_duration_ms as number) * 1e6) / 1e6,
          }));
        expect(rounded(got), JSON.stringify(req)).toEqual(rounded(expected));
      }
    }
  });
});

describe('costs', () => {
  const costsOf = async (project: string, id: string) => {
    const res = await call('/call/read', { project_id: project, id, include_costs: true });
    expect(res.status, res.text).toBe(200);
    return res.body.call.summary.weave.costs as Record<string, Record<string, unknown>>;
  };
  const usageCall = async (project: string, startedAt: string, usage: Record<string, unknown>) => {
    const id = newCallId();
    const res = await call('/call/upsert_batch', { batch: [startItem(project, id, startedAt), endItem(project, id, '2026-03-01T00:00:00Z', { usage })] });
    expect(res.status, res.text).toBe(200);
    return id;
  };

  it('prices gpt-4o-2024-05-13 at its own price ($5 / $15 per million tokens), other gpt-4o snapshots as gpt-4o', async () => {
    // The snapshot-suffix fallback maps `gpt-4o-YYYY-MM-DD` to `gpt-4o`; the first snapshot kept
    // its launch price, which the service's price table (costs/cost_checkpoint.json) lists on its
    // own: input 5e-06, output 1.5e-05.
    const project = 'acme/edges-snapshot';
    const counts = { prompt_tokens: 1_000_000, completion_tokens: 1_000_000, requests: 1 };
    const id = await usageCall(project, '2024-06-01T00:00:00Z', { 'gpt-4o-2024-05-13': counts, 'gpt-4o-2024-08-06': counts });
    const costs = await costsOf(project, id);
    expect(costs['gpt-4o-2024-05-13']).toMatchObject({ prompt_token_cost: 5e-6, completion_token_cost: 1.5e-5, prompt_tokens_total_cost: 5, completion_tokens_total_cost: 15 });
    expect(costs['gpt-4o-2024-08-06']).toMatchObject({ prompt_token_cost: 2.5e-6, completion_token_cost: 1e-5 });
  });

  it('answers requests as the usage counted them: 0 when the usage has no `requests` (as the service)', async () => {
    // The service reads `JSONExtractInt(usage, 'requests')` (token_costs.py get_llm_usage), which is 0
    // for a missing key; SPEC §3's usage (what OTel ingest and the exporter write) never has one.
    const project = 'acme/edges-requests';
    const id = await usageCall(project, '2026-01-01T00:00:00Z', { 'gpt-4o': { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
    expect((await costsOf(project, id))['gpt-4o']).toMatchObject({ requests: 0 });
  });

  it('prices several models of one call, each by its own rank: in effect first, a project before the list price', async () => {
    const project = 'acme/edges-ranks';
    const create = await call('/cost/create', {
      project_id: project,
      costs: {
        // In effect exactly at the second call's start (ties count as in effect, as `started_at >= effective_date`).
        'gpt-4o': { prompt_token_cost: 0.5, completion_token_cost: 0.25, effective_date: '2026-01-01T01:00:00.000001+01:00' },
        // Never in effect for these calls, and no list price: still the price used (the service's second rank).
        'my-model': { prompt_token_cost: 2, completion_token_cost: 4, effective_date: '2030-01-01T00:00:00Z' },
      },
    });
    expect(create.status, create.text).toBe(200);
    const usage = {
      'gpt-4o': { prompt_tokens: 4, completion_tokens: 2 },
      'gpt-4o-mini-2024-07-18': { input_tokens: 1_000_000, output_tokens: 1_000_000 },
      'my-model': { prompt_tokens: 1, completion_tokens: 1 },
      'GPT-4O': { prompt_tokens: 1 },
      'not-a-model': { prompt_tokens: 1 },
      'weird-shape': [1, 2],
    };
    const before = await usageCall(project, '2026-01-01T00:00:00.000000Z', usage);
    const at = await usageCall(project, '2026-01-01T00:00:00.000001Z', usage);

    const early = await costsOf(project, before);
    expect(Object.keys(early).sort()).toEqual(['gpt-4o', 'gpt-4o-mini-2024-07-18', 'my-model']);
    // One microsecond before the project's gpt-4o price: the list price, which is in effect.
    expect(early['gpt-4o']).toMatchObject({ pricing_level: 'default', prompt_token_cost: 2.5e-6, prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 });
    expect(early['gpt-4o-mini-2024-07-18']).toMatchObject({
      pricing_level: 'default',
      prompt_tokens_total_cost: 0.15,
      completion_tokens_total_cost: 0.6,
      provider_id: 'openai',
    });
    expect(early['my-model']).toMatchObject({ pricing_level: 'project', pricing_level_id: project, prompt_tokens_total_cost: 2, effective_date: '2030-01-01T00:00:00.000000Z' });

    const late = await costsOf(project, at);
    expect(late['gpt-4o']).toMatchObject({
      pricing_level: 'project',
      prompt_tokens_total_cost: 2,
      completion_tokens_total_cost: 0.5,
      effective_date: '2026-01-01T00:00:00.000001Z',
      created_by: 'dev',
    });
    // The stream answers the same costs as a read.
    const streamed = await call('/calls/stream_query', { project_id: project, include_costs: true, filter: { call_ids: [at] } });
    expect(JSON.parse(streamed.text.trim()).summary.weave.costs).toEqual(late);
  });
});
