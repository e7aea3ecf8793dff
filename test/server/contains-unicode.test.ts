/**
 * `$contains` with `case_insensitive` folds letters beyond ASCII, on the main connection
 * (`feedback/query`) and on the stream readers (`calls/stream_query`), where the SQL function it
 * needs must be registered too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/unicode';
const TRACE = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee';
const NAMES = ['ÉCOLE normale', 'Straße', 'ΣΟΦΙΑ', 'plain ascii', 'İstanbul', 'ΟΔΟΣΑ', '20 \u212A'];
const callId = (n: number): string => (0xdef00 + n).toString(16).padStart(16, '0');
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
  const batch = NAMES.map((name, n) => ({
    mode: 'start',
    req: {
      start: {
        project_id: PROJECT,
        id: callId(n),
        trace_id: TRACE,
        op_name: 'op',
        display_name: name,
        started_at: `2026-01-01T00:00:0${n}Z`,
        attributes: {},
        inputs: {},
      },
    },
  }));
  expect((await post(server.url, '/call/upsert_batch', { batch })).status).toBe(200);
  for (const [n, name] of NAMES.entries()) {
    const created = await post(server.url, '/feedback/create', {
      project_id: PROJECT,
      weave_ref: `weave:///${PROJECT}/call/${callId(n)}`,
      feedback_type: 'note',
      payload: { note: name },
    });
    expect(created.status, created.text).toBe(200);
  }
});
afterAll(async () => {
  await server.close();
});

const contains = (path: string, substr: unknown) => ({
  $expr: { $contains: { input: { $getField: path }, substr: { $literal: substr }, case_insensitive: true } },
});

async function callsMatching(substr: unknown): Promise<string[]> {
  const response = await post(server.url, '/calls/stream_query', { project_id: PROJECT, query: contains('display_name', substr) });
  expect(response.status, response.text).toBe(200);
  return response.text === '' ? [] : response.text.trim().split('\n').map((line) => JSON.parse(line).display_name);
}

async function notesMatching(substr: unknown): Promise<string[]> {
  const response = await post(server.url, '/feedback/query', { project_id: PROJECT, query: contains('payload.note', substr) });
  expect(response.status, response.text).toBe(200);
  return (response.body.result as Array<{ payload: { note: string } }>).map((record) => record.payload.note);
}

describe('$contains case_insensitive beyond ASCII', () => {
  it('finds accented, Greek and German letters in either case', async () => {
    for (const read of [callsMatching, notesMatching]) {
      expect(await read('école')).toEqual(['ÉCOLE normale']);
      expect(await read('École NORMALE')).toEqual(['ÉCOLE normale']);
      expect(await read('STRASSE')).toEqual([]); // lower-casing, not full case folding: ß stays ß
      expect(await read('STRAßE')).toEqual(['Straße']);
      expect(await read('σοφια')).toEqual(['ΣΟΦΙΑ']);
    }
  });

  it('keeps ASCII substrings on the fast fold, with the same matches', async () => {
    for (const read of [callsMatching, notesMatching]) {
      expect(await read('PLAIN')).toEqual(['plain ascii']);
      expect(await read('normale')).toEqual(['ÉCOLE normale']);
      expect(await read('50%')).toEqual([]);
    }
  });

  it('matches a final sigma inside a word, and the Kelvin sign as written', async () => {
    for (const read of [callsMatching, notesMatching]) {
      expect(await read('ΟΔΟΣ')).toEqual(['ΟΔΟΣΑ']);
      expect(await read('οδος')).toEqual(['ΟΔΟΣΑ']);
      expect(await read('\u212A')).toEqual(['20 \u212A']);
    }
  });

  it('reads a non-text substring as its text', async () => {
    expect(await callsMatching(5)).toEqual([]);
    expect(await notesMatching(true)).toEqual([]);
  });
});
