/**
 * Span events and times. SPEC §3: `otel_dump` = {..., attributes, events: [{name,
 * timestamp, attributes, dropped_attributes_count}], links, resource, scope}; "A mapping never
 * throws: a span that cannot be mapped whole is still sent with what could be mapped and a note in
 * `attributes`". One event whose time cannot be formatted must not take the whole `otel_dump`
 * (span attributes, every other event, links, resource) with it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { MAPPING_ERROR_ATTRIBUTE, toCallParts, writeUpsertItems } from '../../src/mapping/index.js';
import { JsonWriter } from '../../src/wire/json-writer.js';
import { parseTimestamp } from '../../src/server/timestamps.js';
import { startServer } from '../../src/server/index.js';
import { createTracing, PROJECT, START, T0 } from './fixtures.js';

const tracing = createTracing();
afterAll(() => tracing.shutdown());

describe('an event with an unreadable time (real SDK span: addEvent with an invalid Date)', () => {
  it('keeps otel_dump, with the other events and the span attributes, and notes the bad time', () => {
    const { span } = tracing.finish({
      name: 'bad-event-time',
      attributes: { 'input.value': 'q', 'custom.flag': true },
      events: [
        { name: 'good', attributes: { n: 1 }, time: START },
        // The SDK turns an invalid Date into [NaN, NaN] (millisToHrTime(NaN)).
        { name: 'bad', attributes: { n: 2 }, time: new Date(Number.NaN) as unknown as [number, number] },
      ],
    });
    expect(span.events[1]!.time.every((part) => Number.isNaN(part))).toBe(true);
    const { start } = toCallParts(span, PROJECT);
    expect(start.attributes[MAPPING_ERROR_ATTRIBUTE]).toEqual(expect.any(String));
    expect(start.otel_dump, 'otel_dump dropped whole for one event time').toBeDefined();
    const dump = start.otel_dump as { attributes: Record<string, unknown>; events: Array<{ name: string }> };
    expect(dump.attributes).toMatchObject({ custom: { flag: true } });
    expect(dump.events.map((event) => event.name)).toEqual(['good', 'bad']);
  });
});

/**
 * A span time outside years 0001-9999 (here: a start time given in microseconds where the SDK
 * expects milliseconds, a common unit mix-up: `startTime: Date.now() * 1000`) is formatted as
 * `57974-03-28T...Z`, which the service cannot parse (SPEC §2: ISO 8601; the local server's
 * `parseTimestamp` accepts years 0001-9999), so the whole call is refused with a 400 and the span
 * is lost. An unformattable time (NaN) already gets the epoch and a note (to-call.ts formatTime);
 * an unrepresentable one should be treated alike: an accepted time, and a note.
 */
describe('a span time outside the years ISO 8601 / the service can hold', () => {
  const microsAsMillis = T0 * 1_000_000 + 123; // what `Date.now() * 1000` passes as "milliseconds"

  it('gives a started_at the service accepts, and a note', () => {
    const { span } = tracing.finish({ name: 'micros-as-millis', attributes: { 'input.value': 'q' }, start: microsAsMillis as unknown as [number, number] });
    const { start, end } = toCallParts(span, PROJECT);
    expect(parseTimestamp(start.started_at), `started_at ${start.started_at}`).not.toBeNull();
    expect(parseTimestamp(end.ended_at), `ended_at ${end.ended_at}`).not.toBeNull();
    expect(start.attributes[MAPPING_ERROR_ATTRIBUTE]).toEqual(expect.any(String));
  });

  it('is not refused by the local server (the span would be lost)', async () => {
    const { span } = tracing.finish({ name: 'micros-as-millis-2', attributes: { 'input.value': 'q' }, start: microsAsMillis as unknown as [number, number] });
    const server = await startServer({ port: 0, dbPath: ':memory:', users: [{ username: 'dev', password: 'pw', entities: ['*'] }] });
    try {
      const out = new JsonWriter();
      out.begin();
      writeUpsertItems(span, PROJECT, out);
      const response = await fetch(`${server.url}/call/upsert_batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Basic ${Buffer.from('dev:pw').toString('base64')}` },
        body: `{"batch":[${Buffer.from(out.end()).toString('utf8')}]}`,
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
    } finally {
      await server.close();
    }
  });
});
