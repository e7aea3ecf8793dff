/**
 * `call/upsert_batch` bodies are read verbatim when they can be (verbatim-body.ts) and parsed
 * otherwise. Whichever way a batch is read, the server must answer, store and return the same
 * thing: the same batch sent compact (the verbatim path) and pretty-printed (always the parsed
 * path, whitespace inside stored values) must leave identical rows, reads and queries.
 */
import { openSqlite, type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
let db: SqliteDatabase;
beforeAll(async () => {
  server = await startTestServer();
  db = openSqlite(server.dbPath, { readonly: true });
});
afterAll(async () => {
  db.close();
  await server.close();
});

const TRACE = '0123456789abcdef0123456789abcdef';
const callId = (n: number): string => (0xa000 + n).toString(16).padStart(16, '0');

/** Values whose stored text must come out the same either way. */
const TRICKY = {
  unicode: 'é 漢 😀 \u2028',
  escapes: 'quote " backslash \\ newline \n tab \t nul \u0000 del \u007f',
  numbers: [0, -1.5, 0.1, 1e21, 1.5e-7, 123456789012345, 2 ** 53],
  nested: { a: { b: { c: [true, false, null, [], {}] } } },
  empty: '',
};

function batchFor(projectId: string): { batch: unknown[] } {
  const start = (n: number, extra: Record<string, unknown> = {}) => ({
    mode: 'start',
    req: {
      start: {
        project_id: projectId,
        id: callId(n),
        trace_id: TRACE,
        parent_id: n === 0 ? null : callId(0),
        op_name: `op "${n}" é`,
        display_name: n === 1 ? 'Named \\ call' : null,
        started_at: '2026-01-02T03:04:05.000100Z',
        attributes: { model: 'gpt-4o', tricky: TRICKY },
        inputs: { question: TRICKY.unicode, n },
        otel_dump: n % 2 === 0 ? null : { name: 'span', attributes: TRICKY },
        wb_user_id: 'ignored',
        wb_run_step: n,
        not_a_field: { ignored: [1, 2] },
        ...extra,
      },
    },
  });
  const end = (n: number, output: unknown, summary: Record<string, unknown>) => ({
    mode: 'end',
    req: { end: { project_id: projectId, id: callId(n), ended_at: '2026-01-02T03:04:06.5Z', output, summary, exception: n === 3 ? 'boom' : null } },
  });
  return {
    batch: [
      start(0),
      end(0, { answer: TRICKY }, { usage: { 'gpt-4o': { prompt_tokens: 3, completion_tokens: 4 } } }),
      end(1, 'a plain string', {}),
      start(1),
      start(2, { id: null }),
      end(3, 42, { weave: { status: 'made up' }, kept: 1 }),
      start(3),
      end(4, null, { nested: { weave: 'stays' } }),
      end(5, [1, 'two', TRICKY.escapes], {}),
      start(5),
    ],
  };
}

/** Every stored column of a project's rows but the ones that differ by design. */
function storedRows(projectId: string): Array<Record<string, unknown>> {
  const rows = db.prepare('SELECT * FROM calls WHERE project_id = ? ORDER BY rowid').all(projectId) as Array<Record<string, unknown>>;
  // Start 2 has `id: null`: the server generates a UUID, different in each project.
  return rows.map(({ project_id: _project, id, ...row }) => ({ ...row, id: (id as string).length === 16 ? id : 'generated' }));
}

async function upsertText(text: string) {
  const response = await post(server.url, '/call/upsert_batch', text);
  expect(response.status, response.text).toBe(200);
  return response.body.res as Array<Record<string, string>>;
}

describe('call/upsert_batch read verbatim or parsed', () => {
  it('stores, reads and queries the same records whichever way the batch was read', async () => {
    const compact = JSON.stringify(batchFor('acme/verbatim'));
    const pretty = JSON.stringify(batchFor('acme/parsed'), null, 2);
    const [compactRes, prettyRes] = [await upsertText(compact), await upsertText(pretty)];
    const withoutGenerated = (res: Array<Record<string, string>>) => res.map((entry, i) => (i === 4 ? Object.keys(entry) : entry));
    expect(withoutGenerated(compactRes)).toEqual(withoutGenerated(prettyRes));

    expect(storedRows('acme/verbatim')).toEqual(storedRows('acme/parsed'));
    expect(storedRows('acme/verbatim')).toHaveLength(6);

    for (const n of [0, 1, 3, 5]) {
      const flags = { include_costs: true, include_storage_size: true, include_total_storage_size: true };
      const [a, b] = await Promise.all(
        ['acme/verbatim', 'acme/parsed'].map((project) => post(server.url, '/call/read', { project_id: project, id: callId(n), ...flags })),
      );
      expect({ ...a?.body.call, project_id: null }).toEqual({ ...b?.body.call, project_id: null });
    }
    const queried = await Promise.all(
      ['acme/verbatim', 'acme/parsed'].map(async (project) => {
        const response = await post(server.url, '/calls/stream_query', { project_id: project, query: { $expr: { $eq: [{ $getField: 'inputs.question' }, { $literal: TRICKY.unicode }] } } });
        return response.text.split('\n').filter(Boolean).map((line) => ({ ...JSON.parse(line), project_id: null, id: null, trace_id: null }));
      }),
    );
    expect(queried[0]).toHaveLength(5);
    expect(queried[0]).toEqual(queried[1]);
  });

  it('keeps what a client sent: the values read back equal the values written', async () => {
    const body = batchFor('acme/roundtrip');
    await upsertText(JSON.stringify(body));
    const call = (await post(server.url, '/call/read', { project_id: 'acme/roundtrip', id: callId(0) })).body.call;
    expect(call.attributes).toEqual({ model: 'gpt-4o', tricky: TRICKY });
    expect(call.output).toEqual({ answer: TRICKY });
    expect(call.op_name).toBe('op "0" é');
    expect(call.wb_user_id).toBe('dev');
    // The derived summary.weave a client sends is dropped, a nested "weave" key is kept.
    const three = (await post(server.url, '/call/read', { project_id: 'acme/roundtrip', id: callId(3) })).body.call;
    expect(three.summary.kept).toBe(1);
    expect(three.summary.weave.status).toBe('error');
    const stored = db.prepare('SELECT summary FROM calls WHERE project_id = ? AND id = ?').get('acme/roundtrip', callId(4)) as { summary: string };
    expect(stored.summary).toBe('{"nested":{"weave":"stays"}}');
  });

  it('gives a repeated key the parsed meaning (the last one wins) and stores __proto__ keys as data', async () => {
    const text = JSON.stringify(batchFor('acme/repeat')).replace('"model":"gpt-4o"', '"model":"first","model":"gpt-4o"');
    await upsertText(text);
    const call = (await post(server.url, '/call/read', { project_id: 'acme/repeat', id: callId(0) })).body.call;
    expect(call.attributes.model).toBe('gpt-4o');

    // Valid JSON (the hosted service stores it): an own key, never the prototype of anything.
    const poisoned = JSON.stringify(batchFor('acme/poison'))
      .replace('"model":', '"__proto__":{"polluted":1},"model":')
      .replace('"inputs":{', '"inputs":{"constructor":{"prototype":{"polluted":2}},');
    const response = await post(server.url, '/call/upsert_batch', poisoned);
    expect(response.status).toBe(200);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const [stored] = storedRows('acme/poison');
    expect(stored!.attributes).toContain('"__proto__":{"polluted":1}');
    expect(stored!.inputs).toContain('"constructor":{"prototype":{"polluted":2}}');
    const read = (await post(server.url, '/call/read', { project_id: 'acme/poison', id: callId(0) })).body.call;
    expect(Object.hasOwn(read.attributes, '__proto__')).toBe(true);
    expect(read.attributes['__proto__']).toEqual({ polluted: 1 });
  });

  it('answers a compact batch that breaks the schema with the same 422 as ever, echoing what was sent', async () => {
    const part = { project_id: 'acme/bad', id: callId(9), started_at: '2026-01-02T03:04:05Z', attributes: {}, inputs: { q: 1 }, extra: [1] };
    const response = await post(server.url, '/call/upsert_batch', JSON.stringify({ batch: [{ mode: 'start', req: { start: part } }] }));
    expect(response.status).toBe(422);
    expect(response.body.detail).toEqual([
      { type: 'missing', loc: ['body', 'batch', 0, 'req', 'start', 'op_name'], msg: 'Field required', input: part },
    ]);
  });
});
