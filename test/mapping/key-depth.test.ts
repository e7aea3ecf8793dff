/**
 * Attribute keys with many dots. Unflattening nests one object level per key segment (SPEC §3);
 * past MAX_KEY_SEGMENTS a key is kept flat, with a note. The mapping bounds the depth of JSON text
 * (`json-text.ts`: MAX_JSON_DEPTH - 3 - segments, kept as text with a note) because the service
 * refuses a call field nested deeper than MAX_JSON_DEPTH (server: `store/calls-rows.ts`
 * `toJsonText`, 400 "nested deeper than 500 levels"); a key of 600 segments unflattened whole made
 * the same depth in `otel_dump.attributes` (and in `attributes` when the span has no known
 * convention), so the whole span was refused, and at a few thousand segments `JSON.stringify` of
 * the start part overflowed the stack in the exporter's writer (SPEC §3: "A mapping never throws:
 * a span that cannot be mapped whole is still sent with what could be mapped and a note").
 */
import { afterAll, describe, expect, it } from 'vitest';
import { MAPPING_ERROR_ATTRIBUTE, toCallParts, writeUpsertItems, type SpanInput } from '../../src/mapping/index.js';
import { JsonWriter } from '../../src/wire/json-writer.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../src/wire/digest.js';
import { startServer } from '../../src/server/index.js';
import { createTracing, PROJECT, T0 } from './fixtures.js';

const tracing = createTracing();
afterAll(() => tracing.shutdown());

function spanWith(attributes: Record<string, unknown>): SpanInput {
  return {
    name: 'deep-key',
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    kind: 'INTERNAL',
    startTime: [T0, 0],
    endTime: [T0 + 1, 0],
    status: { code: 'UNSET' },
    attributes,
    events: [],
    links: [],
    resource: { attributes: {} },
    scope: { name: 'key-depth' },
  };
}

/** What the server checks per call field (calls-rows.ts toJsonText): no container at depth 500. */
function withinServerDepth(value: unknown): boolean {
  return typeof value !== 'object' || value === null || !nestsDeeperThan(value, MAX_JSON_DEPTH);
}

const DEEP_KEY = `${'seg.'.repeat(600)}leaf`; // 601 segments

describe('attribute keys with hundreds of segments', () => {
  it('give call fields the service can store (no field nested past MAX_JSON_DEPTH), with a note', () => {
    const { start, end } = toCallParts(spanWith({ 'input.value': 'question', [DEEP_KEY]: 'v' }), PROJECT);
    expect(start.inputs).toEqual({ 'input.value': 'question' });
    for (const [field, value] of Object.entries({ attributes: start.attributes, inputs: start.inputs, otel_dump: start.otel_dump, output: end.output })) {
      expect(withinServerDepth(value), `${field} nests deeper than ${MAX_JSON_DEPTH}`).toBe(true);
    }
    // Nothing lost: the value is still somewhere in the dump, and the call says what happened.
    expect(JSON.stringify(start.otel_dump)).toContain('"v"');
    expect(start.attributes[MAPPING_ERROR_ATTRIBUTE]).toEqual(expect.any(String));
  });

  it('in a span of no known convention (attributes = all attributes) stay within the bound too', () => {
    const { start } = toCallParts(spanWith({ [DEEP_KEY]: 'v' }), PROJECT);
    expect(withinServerDepth(start.attributes)).toBe(true);
    expect(withinServerDepth(start.otel_dump)).toBe(true);
  });

  it('do not make the exporter writer throw (a key of 5000 segments)', () => {
    const out = new JsonWriter();
    out.begin();
    const span = spanWith({ 'input.value': 'question', [`${'a.'.repeat(5000)}z`]: 1 });
    expect(() => writeUpsertItems(span, PROJECT, out)).not.toThrow();
  });

  it('from a real SDK span are accepted by the local server', async () => {
    const { span } = tracing.finish({ name: 'sdk-deep-key', attributes: { 'input.value': 'q', [DEEP_KEY]: 'v' } });
    const server = await startServer({ port: 0, dbPath: ':memory:', users: [{ username: 'dev', password: 'pw', entities: ['*'] }] });
    try {
      const out = new JsonWriter();
      out.begin();
      writeUpsertItems(span, PROJECT, out);
      const body = `{"batch":[${Buffer.from(out.end()).toString('utf8')}]}`;
      const response = await fetch(`${server.url}/call/upsert_batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Basic ${Buffer.from('dev:pw').toString('base64')}` },
        body,
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
    } finally {
      await server.close();
    }
  });
});
