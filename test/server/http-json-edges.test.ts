/**
 * The HTTP layer: JSON edge cases every route shares: lone surrogates in free-form values, big
 * integers on both write routes, byte order marks, duplicate keys.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'alice', password: 'secret', entities: ['acme'] }] });
});
afterAll(async () => {
  await server.close();
});

const PROJECT = 'acme/json';
const TRACE = `${'0'.repeat(31)}1`;
let next = 0;
const newId = (): string => (0xd000 + ++next).toString(16).padStart(16, '0');

/** A `call/start` body as text, with `inputs` and `op_name` spelled by the caller. */
const startText = (id: string, { opName = '"op"', inputs = '{}' } = {}): string =>
  `{"start":{"project_id":"${PROJECT}","id":"${id}","trace_id":"${TRACE}","op_name":${opName},"started_at":"2026-01-02T03:04:05Z","attributes":{},"inputs":${inputs}}}`;

async function readCall(id: string): Promise<any> {
  const response = await post(server.url, '/call/read', { project_id: PROJECT, id });
  expect(response.status).toBe(200);
  return response.body.call;
}

describe('lone surrogates (\\ud800 escapes)', () => {
  it('keeps a lone surrogate inside inputs (free-form value) as sent', async () => {
    const id = newId();
    expect((await post(server.url, '/call/start', startText(id, { inputs: '{"x":"\\ud800"}' }))).status).toBe(200);
    expect((await readCall(id)).inputs).toEqual({ x: '\ud800' });
  });
});

describe('numbers JSON can spell but a double cannot hold', () => {
  it('keeps an integer past 2^53 in call inputs exact on call/start, as upsert_batch does', async () => {
    const big = '123456789012345678901234567890';
    const viaUpsert = newId();
    expect((await post(server.url, '/call/upsert_batch', `{"batch":[{"mode":"start","req":${startText(viaUpsert, { inputs: `{"n":${big}}` })}}]}`)).status).toBe(200);
    const viaStart = newId();
    expect((await post(server.url, '/call/start', startText(viaStart, { inputs: `{"n":${big}}` }))).status).toBe(200);
    const raw = async (id: string): Promise<string> => (await post(server.url, '/call/read', { project_id: PROJECT, id })).text;
    const upsertText = await raw(viaUpsert);
    const startTextRead = await raw(viaStart);
    // Whatever upsert_batch keeps, call/start keeps the same.
    expect(startTextRead.includes(`"n":${big}`)).toBe(upsertText.includes(`"n":${big}`));
  });
});

describe('other JSON text edges', () => {
  it('refuses a body with two byte order marks (only one leading BOM may be ignored, RFC 8259 §8.1)', async () => {
    const response = await post(server.url, '/call/read', `\ufeff\ufeff{"project_id":"${PROJECT}","id":"00000000000000a1"}`);
    expect(response.status).toBe(400);
  });

  it('authorizes the project it stores, whichever of duplicate project_id keys is taken', async () => {
    const alice = { username: 'alice', password: 'secret' };
    const id = newId();
    const text = startText(id).replace(`"project_id":"${PROJECT}"`, `"project_id":"${PROJECT}","project_id":"other/x"`);
    const upsert = await post(server.url, '/call/upsert_batch', `{"batch":[{"mode":"start","req":${text}}]}`, alice);
    const start = await post(server.url, '/call/start', text, alice);
    for (const response of [upsert, start]) expect(response.status).toBe(403);
    expect((await post(server.url, '/call/read', { project_id: 'other/x', id })).body.call).toBeNull();
  });
});
