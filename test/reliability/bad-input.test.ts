/**
 * Bad input, property-based, on every endpoint (the calls endpoints as well as the content ones
 * `test/server/content-fuzz.test.ts` covers by replacing one key): wrong types, missing and extra
 * keys, deep nesting, huge strings, invalid UTF-8, SQL text, hostile `$expr` trees. Every refusal
 * is a 4xx that says why (`reason` or `detail`), never a 500 or a crash, never shows internals,
 * and leaves the database byte-for-byte as it was. Fixed seeds, bounded runs.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';
import { databaseDigest, expectClearRefusal, expectCleanErrorBody, postScanned } from './support.js';

const PROJECT = 'acme/fuzz';
const CALL = 'aaaaaaaaaaaaaaaa';
const TRACE = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';
const REF = `weave:///${PROJECT}/call/${CALL}`;
const MAX_BODY_BYTES = 1024 * 1024;
const SEED = 20260321;

const started = { project_id: PROJECT, id: CALL, trace_id: TRACE, op_name: 'fuzz.op', started_at: '2026-01-01T00:00:00Z', attributes: { a: 1 }, inputs: { q: 'x' } };
const ended = { project_id: PROJECT, id: CALL, ended_at: '2026-01-01T00:00:01Z', summary: {}, output: { answer: 42 } };
const query = { $expr: { $and: [{ $eq: [{ $getField: 'op_name' }, { $literal: 'fuzz.op' }] }, { $gt: [{ $getField: 'inputs.n' }, { $literal: 1 }] }] } };

/** One valid body per JSON endpoint: the mutations below start from these. */
const VALID_BODIES: Readonly<Record<string, Record<string, unknown>>> = {
  '/call/start': { start: started },
  '/call/end': { end: ended },
  '/call/upsert_batch': { batch: [{ mode: 'start', req: { start: started } }, { mode: 'end', req: { end: ended } }] },
  [`/v2/${PROJECT}/calls/complete`]: { batch: [{ ...started, ...ended }] },
  '/call/read': { project_id: PROJECT, id: CALL, include_costs: true, include_storage_size: true, include_total_storage_size: true },
  '/calls/stream_query': {
    project_id: PROJECT,
    filter: { op_names: ['fuzz.op'], trace_ids: [TRACE], trace_roots_only: true },
    query,
    sort_by: [{ field: 'started_at', direction: 'desc' }],
    limit: 5,
    offset: 0,
    columns: ['id', 'inputs'],
  },
  '/calls/delete': { project_id: PROJECT, call_ids: ['cccccccccccccccc'] },
  '/call/update': { project_id: PROJECT, call_id: CALL, display_name: 'renamed' },
  '/obj/create': { obj: { project_id: PROJECT, object_id: 'fuzz', val: { a: [1, 2] } } },
  '/obj/read': { project_id: PROJECT, object_id: 'fuzz', digest: 'latest', metadata_only: false },
  '/objs/query': { project_id: PROJECT, filter: { object_ids: ['fuzz'], latest_only: true }, sort_by: [{ field: 'created_at', direction: 'asc' }], limit: 3 },
  '/feedback/create': {
    project_id: PROJECT,
    weave_ref: REF,
    feedback_type: 'wandb.runnable.judge',
    payload: { output: { score: 1 } },
    runnable_ref: `weave:///${PROJECT}/op/judge:abc`,
    call_ref: REF,
  },
  '/feedback/query': { project_id: PROJECT, fields: ['id', 'payload.note'], query: { $expr: { $eq: [{ $getField: 'payload.note' }, { $literal: 'hi' }] } }, limit: 2 },
  '/feedback/purge': { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: 'nope' }] } } },
  '/file/content': { project_id: PROJECT, digest: 'nope' },
};

type Path = ReadonlyArray<string | number>;

/** Every path into `value` (not the root), objects and arrays alike. */
function pathsOf(value: unknown, prefix: Path = []): Path[] {
  if (value === null || typeof value !== 'object') return [];
  const entries = Array.isArray(value) ? value.map((item, index) => [index, item] as const) : Object.entries(value);
  return entries.flatMap(([key, item]) => [[...prefix, key], ...pathsOf(item, [...prefix, key])]);
}

/** A copy of `body` with the node at `path` replaced by `value` (or removed when `value` is `REMOVE`). */
const REMOVE = Symbol('remove');
function edit(body: unknown, path: Path, value: unknown): unknown {
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let parent: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path[path.length - 1] as string | number;
  if (value !== REMOVE) parent[last] = value;
  else if (Array.isArray(parent)) parent.splice(last as number, 1);
  else delete parent[last];
  return copy;
}

/**
 * Deep and huge values travel through fast-check as short markers and are expanded only in the
 * request text: fast-check (and any recursive walk) would overflow the stack printing them.
 */
const deepMarker = (depth: number, kind: 'array' | 'object'): string => `@@deep:${kind}:${depth}@@`;
const hugeMarker = (length: number): string => `@@huge:${length}@@`;
function bodyText(body: unknown): string {
  return JSON.stringify(body).replace(/"@@(deep|huge):(?:(array|object):)?(\d+)@@"/g, (_match, what: string, kind: string, size: string) => {
    const n = Number(size);
    if (what === 'huge') return `"${'x'.repeat(n)}"`;
    return kind === 'array' ? `${'['.repeat(n)}1${']'.repeat(n)}` : `${'{"d":'.repeat(n)}1${'}'.repeat(n)}`;
  });
}

const sqlText = fc.constantFrom(
  "'; DROP TABLE calls; --",
  "x' OR '1'='1",
  'acme/fuzz" OR 1=1 --',
  '1); DELETE FROM feedback; --',
  "json_extract(payload, '$')",
  'inputs.q) OR (1=1',
  '$..*',
  'a\\.b.0.c',
  '__proto__',
  'constructor.prototype',
  '\u0000',
  '\ud800',
  'latest',
  'v-1',
  'weave:///other/secret/call/aaaaaaaaaaaaaaaa',
);

const hostileScalar = fc.oneof(
  fc.string({ maxLength: 40 }),
  sqlText,
  fc.constantFrom(0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, true, false, null, '', ' '),
);

/** `$expr` operands and operations, valid and not: unknown operators, wrong arity, odd paths. */
const exprTree: fc.Arbitrary<unknown> = fc.letrec<{ op: unknown; operand: unknown }>((tie) => ({
  // maxDepth: past it, oneof takes its first (non-recursive) alternative, so trees stay small.
  operand: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    fc.record({ $getField: fc.oneof(fc.constantFrom('op_name', 'inputs.q', 'payload.note', 'summary.weave.status', 'project_id', 'id', 'nope', 'inputs..x', 'inputs.0.a\\.b', ''), sqlText, fc.string({ maxLength: 20 })) }),
    fc.record({ $literal: fc.oneof(hostileScalar, fc.jsonValue({ maxDepth: 2 })) }),
    fc.record({ $convert: fc.record({ input: tie('operand'), to: fc.constantFrom('double', 'int', 'string', 'bool', 'exists', 'date', '') }) }),
    tie('op'),
    hostileScalar,
  ),
  op: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    fc.record({ $eq: fc.tuple(fc.record({ $getField: fc.constantFrom('op_name', 'payload.note', 'inputs.q') }), fc.record({ $literal: hostileScalar })) }),
    fc.record({ $and: fc.array(tie('op'), { maxLength: 3 }) }),
    fc.record({ $or: fc.array(tie('op'), { maxLength: 3 }) }),
    fc.record({ $not: fc.array(tie('op'), { maxLength: 2 }) }),
    fc.tuple(fc.constantFrom('$eq', '$gt', '$gte', '$lt', '$lte', '$in', '$nope', '$where', 'eq'), fc.array(tie('operand'), { maxLength: 3 })).map(([name, args]) => ({ [name]: args })),
    fc.record({ $contains: fc.record({ input: tie('operand'), substr: tie('operand'), case_insensitive: fc.oneof(fc.boolean(), hostileScalar) }, { requiredKeys: [] }) }),
    fc.record({ $eq: tie('operand') }),
    fc.dictionary(fc.constantFrom('$eq', '$and', '$literal'), tie('operand'), { minKeys: 2, maxKeys: 3 }),
  ),
})).op;

const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  hostileScalar,
  fc.jsonValue({ maxDepth: 3 }),
  fc.tuple(fc.constantFrom(64, 1_000, 20_000), fc.constantFrom('array' as const, 'object' as const)).map(([depth, kind]) => deepMarker(depth, kind)),
  fc.constantFrom(10_000, 300_000, 2_000_000).map(hugeMarker),
  exprTree.map((op) => ({ $expr: op })),
);

/** A mutated body: one node replaced or removed, a key added, or a whole body of the wrong kind. */
function mutations(valid: Record<string, unknown>): fc.Arbitrary<unknown> {
  const paths = pathsOf(valid);
  const objectPaths: Path[] = [[], ...paths.filter((path) => {
    const node = path.reduce<unknown>((value, key) => (value as Record<string | number, unknown>)[key], valid);
    return node !== null && typeof node === 'object' && !Array.isArray(node);
  })];
  return fc.oneof(
    fc.tuple(fc.constantFrom(...paths), hostileValue).map(([path, value]) => edit(valid, path, value)),
    fc.constantFrom(...paths).map((path) => edit(valid, path, REMOVE)),
    fc.tuple(fc.constantFrom(...objectPaths), fc.oneof(fc.string({ maxLength: 12 }), sqlText), hostileValue).map(([path, key, value]) =>
      edit(valid, [...path, key], value),
    ),
    hostileValue,
  );
}

let server: TestServer;

/** Send `body`, then check the promises: never 5xx, a clear 4xx, nothing changed by a refusal. */
async function expectSafe(path: string, body: unknown, okStatuses: readonly number[] = [200]): Promise<number> {
  const before = databaseDigest(server.dbPath);
  const response = await post(server.url, path, bodyText(body));
  expectCleanErrorBody(response.status, response.text, body);
  if (!okStatuses.includes(response.status)) {
    expectClearRefusal(response);
    expect(databaseDigest(server.dbPath), `${path} answered ${response.status} but changed the database`).toBe(before);
  }
  return response.status;
}

// A fresh database per test: accepted mutations (300 KB strings) pile up, and each check digests it all.
beforeEach(async () => {
  server = await startTestServer({ maxBodyBytes: MAX_BODY_BYTES });
  // Something in every table, so reads hit rows and a refused write has something to disturb.
  for (const [path, body] of Object.entries(VALID_BODIES)) {
    if (path === '/calls/delete' || path === '/feedback/purge') continue;
    await postScanned(server.url, path, path.startsWith('/v2/') ? { batch: [{ ...started, ...ended, id: 'dddddddddddddddd' }] } : body);
  }
  const form = new FormData();
  form.set('project_id', PROJECT);
  form.set('file', new Blob([Buffer.from('seed bytes')]), 'seed.txt');
  const upload = await fetch(`${server.url}/file/create`, { method: 'POST', headers: { authorization: basicAuth(server) }, body: form });
  expect(upload.status).toBe(200);
});
afterEach(async () => server.close());

describe('every JSON endpoint under mutated bodies', () => {
  for (const [path, valid] of Object.entries(VALID_BODIES)) {
    it(`${path}: 4xx with a reason, never 500, database unchanged by refusals`, async () => {
      const statuses = new Set<number>();
      await fc.assert(
        fc.asyncProperty(mutations(valid), async (body) => {
          statuses.add(await expectSafe(path, body));
        }),
        { numRuns: 45, seed: SEED },
      );
      // The fuzzer reached the validation paths, not only one kind of refusal.
      expect([...statuses].some((status) => status === 422 || status === 400 || status === 413)).toBe(true);
    });
  }
});

describe('$expr trees on every query endpoint', () => {
  const queryEndpoints: Array<[string, (expr: unknown) => Record<string, unknown>]> = [
    ['/calls/stream_query', (expr) => ({ project_id: PROJECT, query: { $expr: expr } })],
    ['/feedback/query', (expr) => ({ project_id: PROJECT, query: { $expr: expr } })],
    ['/feedback/purge', (expr) => ({ project_id: PROJECT, query: { $expr: expr } })],
  ];
  for (const [path, wrap] of queryEndpoints) {
    it(`${path}: unknown operators, wrong arity, odd paths and literals -> 200/400/422 only`, async () => {
      await fc.assert(
        fc.asyncProperty(exprTree, async (expr) => {
          const status = await expectSafe(path, wrap(expr));
          expect([200, 400, 422]).toContain(status);
        }),
        { numRuns: 80, seed: SEED },
      );
    });
  }

  it('answers a 422 for an operand nested 20 000 deep, echoing a bounded input (it used to break the answer)', async () => {
    const deep = deepMarker(20_000, 'array');
    for (const path of ['/calls/stream_query', '/feedback/query']) {
      const response = await post(server.url, path, bodyText({ project_id: PROJECT, query: { $expr: { $eq: [deep, { $literal: 1 }] } } }));
      expect(response.status).toBe(422);
      expect(response.body.detail[0]).toMatchObject({ loc: ['body', 'query', '$expr', '$eq', 0], input: '[unprintable]' });
      expect(response.text.length).toBeLessThan(4096);
    }
  });

  it('names the field of a well-formed query on an unknown field (400) and locates a grammar error (422)', async () => {
    const unknown = await postScanned(server.url, '/calls/stream_query', { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: 'no_such' }, { $literal: 1 }] } } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.reason).toContain('no_such');
    const arity = await postScanned(server.url, '/calls/stream_query', { project_id: PROJECT, query: { $expr: { $eq: [{ $literal: 1 }] } } });
    expect(arity.status).toBe(422);
    expect(arity.body.detail[0].loc.slice(0, 3)).toEqual(['body', 'query', '$expr']);
  });
});

/** POST raw bytes as application/json (fetch would re-encode a string as valid UTF-8). */
async function postBytes(path: string, bytes: Buffer): Promise<{ status: number; text: string; body: unknown }> {
  const response = await fetch(server.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: basicAuth(server) },
    body: bytes,
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // left as text
  }
  expectCleanErrorBody(response.status, text, bytes.toString('latin1'));
  return { status: response.status, text, body };
}

describe('bodies that are not valid UTF-8 JSON text', () => {
  const INVALID_UTF8 = [
    Buffer.from([0xff, 0xfe]),
    Buffer.from([0xc3, 0x28]), // a lead byte without its continuation
    Buffer.from([0xed, 0xa0, 0x80]), // an encoded surrogate
    Buffer.from([0xf4, 0x90, 0x80, 0x80]), // past U+10FFFF
    Buffer.from([0xe2, 0x82]), // truncated sequence
  ];
  for (const [path, valid] of Object.entries(VALID_BODIES)) {
    it(`${path}: raw bytes inside strings and around the JSON are a 400, never a 500 or a write`, async () => {
      const text = JSON.stringify(valid);
      // Inside the first string value, and as garbage before the JSON.
      const quote = text.indexOf('"', text.indexOf(':') + 1) + 1;
      for (const bad of INVALID_UTF8) {
        const inside = Buffer.concat([Buffer.from(text.slice(0, quote)), bad, Buffer.from(text.slice(quote))]);
        const before = databaseDigest(server.dbPath);
        // Refused, not stored with U+FFFD in place of the bytes.
        const response = await postBytes(path, inside);
        expect(response.status).toBe(400);
        expect(response.body).toEqual({ reason: 'Malformed JSON body: not valid UTF-8' });
        expect(databaseDigest(server.dbPath)).toBe(before);
        const garbage = await postBytes(path, Buffer.concat([bad, Buffer.from(text)]));
        expect(garbage.status).toBe(400);
        expectClearRefusal(garbage);
        expect(databaseDigest(server.dbPath)).toBe(before);
      }
    });
  }
});

describe('the non-JSON endpoints', () => {
  it('/file/create: arbitrary multipart bodies and headers -> 4xx with a reason, never 500', async () => {
    const boundary = 'fuzzboundary';
    const part = (headers: string, content: string): string => `--${boundary}\r\n${headers}\r\n\r\n${content}\r\n`;
    const cases: Array<[string, string | Buffer]> = [
      [`multipart/form-data; boundary=${boundary}`, ''],
      [`multipart/form-data; boundary=${boundary}`, `--${boundary}\r\nContent-Disposition: form-data; name="project_id"\r\n\r\nacme/fuzz`], // truncated
      [`multipart/form-data; boundary=${boundary}`, part('Content-Disposition: form-data; name="project_id"', "acme/fuzz'; DROP TABLE files; --") + `--${boundary}--\r\n`],
      [`multipart/form-data; boundary=${boundary}`, part('Content-Disposition: form-data; name="project_id"', 'acme') + part('Content-Disposition: form-data; name="file"; filename="a"', 'x') + `--${boundary}--\r\n`],
      [`multipart/form-data; boundary=${boundary}`, part('Content-Disposition: form-data; name="__proto__"', 'x') + `--${boundary}--\r\n`],
      [`multipart/form-data; boundary=${boundary}`, part('Content-Disposition: form-data; name="project_id"', 'x'.repeat(10_000)) + `--${boundary}--\r\n`],
      ['multipart/form-data', 'no boundary'],
      [`multipart/form-data; boundary=${boundary}`, Buffer.concat([Buffer.from(`--${boundary}\r\n`), Buffer.from([0xff, 0x00, 0xfe]), Buffer.from(`\r\n--${boundary}--\r\n`)])],
      ['application/json', JSON.stringify({ project_id: PROJECT, file: 'x' })],
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.constantFrom(...cases),
          fc.tuple(fc.constant(`multipart/form-data; boundary=${boundary}`), fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes))),
        ),
        async ([contentType, body]) => {
          const before = databaseDigest(server.dbPath);
          const response = await fetch(`${server.url}/file/create`, { method: 'POST', headers: { 'content-type': contentType, authorization: basicAuth(server) }, body });
          const text = await response.text();
          expectCleanErrorBody(response.status, text, typeof body === 'string' ? body : body.toString('latin1'));
          expectClearRefusal({ status: response.status, text, body: JSON.parse(text) as unknown });
          expect(databaseDigest(server.dbPath)).toBe(before);
        },
      ),
      { numRuns: 40, seed: SEED },
    );
  });

  it('/v2/{entity}/{project}/calls/complete: hostile path segments -> 4xx with a reason', async () => {
    const body = VALID_BODIES[`/v2/${PROJECT}/calls/complete`];
    for (const path of [
      '/v2/acme/fuzz%2Fx/calls/complete',
      '/v2/..%2F..%2Fother/secret/calls/complete',
      "/v2/acme/fu'zz/calls/complete",
      `/v2/acme/${'p'.repeat(5000)}/calls/complete`,
      '/v2/acme%20x/fuzz/calls/complete',
      '/v2/%FF%FE/fuzz/calls/complete',
    ]) {
      const before = databaseDigest(server.dbPath);
      const response = await postScanned(server.url, path, body);
      expectClearRefusal(response);
      expect(response.status).toBe(400);
      expect(response.text).not.toContain('ppppp'); // the path is not echoed back
      expect(databaseDigest(server.dbPath)).toBe(before);
    }
  });
});
