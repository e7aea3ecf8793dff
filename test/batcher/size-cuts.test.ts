/**
 * Hunt (delivery guarantees): sizes of what is sent after a 413 and after the complete-mode switch
 * (SPEC §4.2, §4.6, §4.9). Scripted in-memory transport, as in batcher.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { diag } from '@opentelemetry/api';
import { createBatcher, type Batcher, type RecordCodec } from '../../src/batcher/index.js';
import type { SendOutcome } from '../../src/client/transport.js';
import { FakeTransport, OK, batcherOptions, countingCodec, record, type Script, type TestRecord } from './fake-transport.js';

const FAKED = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] as const;

beforeEach(() => {
  vi.useFakeTimers({ toFake: [...FAKED] });
  // Nothing printed: the batcher's messages are not what these tests look at.
  diag.setLogger({ error() {}, warn() {}, info() {}, debug() {}, verbose() {} });
});

afterEach(() => {
  diag.disable();
  vi.useRealTimers();
});

const COMPLETE_MODE_REQUIRED: SendOutcome = {
  kind: 'reject',
  status: 400,
  reason: 'this project is in complete mode',
  errorCode: 'CALLS_COMPLETE_MODE_REQUIRED',
};

const tooLargeOver = (limit: number): Script => (request) =>
  Buffer.byteLength(request.body) > limit ? { kind: 'split', status: 413, reason: 'Request too large' } : OK;

/** A record with one long string and `numbers` values that are not strings (nothing to cut there). */
interface MixedRecord extends TestRecord {
  readonly numbers: number;
}

function mixedCodec(): RecordCodec<MixedRecord> {
  const start = (item: MixedRecord) => ({
    project_id: 'acme/demo',
    id: item.id,
    payload: item.payload,
    // e.g. an embedding or token ids in an attribute: numbers only, which no cut can shorten.
    numbers: Array.from({ length: item.numbers }, (_, index) => 100_000 + index),
  });
  return {
    estimateBytes: (item) => 200 + (item.payload?.length ?? 0) + item.numbers * 7,
    toUpsertItems: (item) => [
      { mode: 'start', req: { start: start(item) } },
      { mode: 'end', req: { end: { project_id: 'acme/demo', id: item.id, summary: {} } } },
    ],
    toCompletedCall: (item) => start(item),
  };
}

describe('413 on a single span (SPEC §4.6)', () => {
  it('cuts its largest strings and sends it once more when the cut cannot reach a quarter of its size', async () => {
    // 100 KB of text + ~70 KB of numbers: cutting the text leaves ~70 KB (~40% of the span), which
    // the server (limit 120 KB) takes. The batcher aims at 25%; failing that, it must still try the
    // cut it can make rather than drop the span.
    const transport = new FakeTransport(tooLargeOver(120_000));
    const batcher: Batcher<MixedRecord> = createBatcher({
      ...batcherOptions(transport, countingCodec()),
      codec: mixedCodec(),
    });
    batcher.add({ ...record(1, 'z'.repeat(100_000)), numbers: 10_000 });
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ delivered: 1, dropped: { too_large: 0 } });
    const last = transport.posted.at(-1)!;
    expect(Buffer.byteLength(last.body)).toBeLessThanOrEqual(120_000);
    expect(JSON.parse(last.body).batch[0].req.start.payload).toMatch(/…\[truncated \d+ bytes\]$/);
  });
});

describe('maxBatchBytes after the switch to complete mode (SPEC §4.2, §4.9)', () => {
  it('never sends a body over maxBatchBytes, also when a span cut to fit is re-sent as a completed call', async () => {
    const maxBatchBytes = 4000;
    const transport = new FakeTransport((request) => (request.path === '/call/upsert_batch' ? COMPLETE_MODE_REQUIRED : OK));
    const batcher = createBatcher(batcherOptions(transport, countingCodec(), { maxBatchBytes }));
    // Over maxBatchBytes: cut to fit before its first request (as batcher.test.ts shows).
    batcher.add(record(1, 'w'.repeat(50_000)));
    await batcher.forceFlush();
    expect(batcher.stats().delivered).toBe(1);
    expect(transport.posted.map((request) => request.path)).toEqual(['/call/upsert_batch', '/v2/acme/demo/calls/complete']);
    expect(transport.posted.map((request) => Buffer.byteLength(request.body) <= maxBatchBytes)).toEqual([true, true]);
  });
});
