/**
 * The batcher's scheduling and accounting (SPEC §4) with fake timers and a scripted in-memory
 * transport. Behaviour over real HTTP is in `delivery-http.test.ts`.
 */
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { context, diag, DiagLogLevel, type DiagLogger } from '@opentelemetry/api';
import { isTracingSuppressed } from '@opentelemetry/core';
import { createBatcher, type Batcher } from '../../src/batcher/index.js';
import { settleWithin, SLICE_BUDGET_MS } from '../../src/batcher/batcher.js';
import type { SendOutcome } from '../../src/client/transport.js';
import type { JsonWriter } from '../../src/wire/json-writer.js';
import type { DeliveryOptions } from '../../src/options.js';
import {
  FakeTransport,
  OK,
  batcherOptions,
  countingCodec,
  deferred,
  record,
  type Script,
  type TestRecord,
} from './fake-transport.js';

const UNAVAILABLE: SendOutcome = { kind: 'retry', status: 503, reason: 'HTTP 503' };

let batcher: Batcher<TestRecord> | undefined;
let logged: Array<{ level: string; message: string }>;

function capturingLogger(): DiagLogger {
  const push = (level: string) => (message: string) => logged.push({ level, message });
  return { error: push('error'), warn: push('warn'), info: push('info'), debug: push('debug'), verbose: push('verbose') };
}

/**
 * Timers, clocks and Date are faked; `setImmediate` stays real. The batcher starts every send from a
 * `setImmediate` (never inside `add()`), and a faked immediate scheduled during a tick fires a fake
 * millisecond later, which would shift every timing asserted below.
 */
const FAKED = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] as const;

beforeEach(() => {
  vi.useFakeTimers({ toFake: [...FAKED] });
  logged = [];
  diag.setLogger(capturingLogger(), DiagLogLevel.ALL);
});

afterEach(async () => {
  diag.disable();
  vi.useRealTimers();
  batcher = undefined;
});

function setup(delivery: DeliveryOptions = {}, script?: Script) {
  const transport = new FakeTransport(script);
  const codec = countingCodec();
  batcher = createBatcher(batcherOptions(transport, codec, delivery));
  return { transport, codec, batcher };
}

function addRecords(target: Batcher<TestRecord>, from: number, count: number, payload = ''): void {
  for (let index = from; index < from + count; index += 1) target.add(record(index, payload));
}

/** A few turns of the real event loop: enough for a scheduled send to take its batch and post. */
async function turnEventLoop(): Promise<void> {
  for (let turn = 0; turn < 5; turn += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Let due timers (after `ms` of fake time), queued immediates and microtasks run. */
async function settle(ms = 0): Promise<void> {
  await turnEventLoop();
  await vi.advanceTimersByTimeAsync(ms);
  await turnEventLoop();
}

describe('batching by count, bytes and interval (SPEC §4.2)', () => {
  it('sends a full batch at once and the rest after flushIntervalMs', async () => {
    const { transport, batcher } = setup({ maxBatchItems: 10, flushIntervalMs: 1000 });
    addRecords(batcher, 0, 12);
    await settle();
    // A span is two items: 10 items = 5 spans per batch.
    expect(transport.posted.map((request) => request.ids.length)).toEqual([5, 5]);
    await settle(999);
    expect(transport.posted).toHaveLength(2);
    await settle(1);
    expect(transport.posted.map((request) => request.ids.length)).toEqual([5, 5, 2]);
    expect(batcher.stats()).toMatchObject({ delivered: 12, queued: 0, inFlight: 0, batchesSent: 3, queuedBytes: 0 });
  });

  it('keeps every body within maxBatchBytes and every batch within maxBatchItems', async () => {
    const { transport, batcher } = setup({ maxBatchItems: 7, maxBatchBytes: 2000 });
    for (let index = 0; index < 60; index += 1) batcher.add(record(index, 'p'.repeat(index * 7)));
    await batcher.forceFlush();
    const ids = transport.allIds();
    expect(new Set(ids).size).toBe(60);
    for (const request of transport.posted) {
      expect(Buffer.byteLength(request.body)).toBeLessThanOrEqual(2000);
      expect(JSON.parse(request.body).batch.length).toBeLessThanOrEqual(7);
    }
    expect(batcher.stats().delivered).toBe(60);
  });

  it('never separates the start and end of one span, even with maxBatchItems 3', async () => {
    const { transport, batcher } = setup({ maxBatchItems: 3 });
    addRecords(batcher, 0, 3);
    await batcher.forceFlush();
    for (const request of transport.posted) {
      expect(JSON.parse(request.body).batch.map((item: { mode: string }) => item.mode)).toEqual(['start', 'end']);
    }
    expect(transport.posted).toHaveLength(3);
  });

  it('maps and serialises each span once, when its batch is built, not in add()', async () => {
    const { codec, batcher } = setup({ flushIntervalMs: 1000 }, (_request, index) => (index < 3 ? UNAVAILABLE : OK));
    addRecords(batcher, 0, 20);
    expect(codec.mapped).toBe(0);
    await settle(1000);
    expect(codec.mapped).toBe(20);
    const flushed = batcher.forceFlush();
    await settle(5000);
    await flushed;
    expect(batcher.stats()).toMatchObject({ delivered: 20, retried: 3 });
    expect(codec.mapped).toBe(20);
  });
});

describe('items the codec writes itself (SPEC §4.2)', () => {
  it("sends the bytes the codec writes, byte for byte, and never stringifies the items", async () => {
    const codec = countingCodec();
    let written = 0;
    const withWriter = {
      ...codec,
      toUpsertItems: () => {
        throw new Error('toUpsertItems must not run when writeUpsertItems exists');
      },
      writeUpsertItems: (item: TestRecord, out: JsonWriter) => {
        written += 1;
        out.jsonText(`{"mode":"start","req":{"start":{"project_id":"acme/demo","id":"${item.id}","note":"é😀中\\u0001"}}}`);
        out.comma();
        out.jsonText(`{"mode":"end","req":{"end":{"project_id":"acme/demo","id":"${item.id}"}}}`);
      },
    };
    const transport = new FakeTransport();
    batcher = createBatcher(batcherOptions(transport, withWriter, { maxBatchItems: 4 }));
    addRecords(batcher, 0, 3);
    await batcher.forceFlush();
    expect(written).toBe(3);
    const bodies = transport.posted.map((request) => JSON.parse(request.body) as { batch: Array<Record<string, any>> });
    expect(bodies.map((body) => body.batch.length)).toEqual([4, 2]);
    const starts = bodies.flatMap((body) => body.batch.filter((item) => item.mode === 'start'));
    expect(starts.map((item) => item.req.start.note)).toEqual(Array(3).fill('é😀中\u0001'));
    expect(transport.allIds()).toEqual([0, 1, 2].map((index) => record(index).id));
    expect(batcher.stats()).toMatchObject({ delivered: 3, queuedBytes: 0 });
  });

  it('drops a record whose writer throws half way as rejected, and sends the others whole', async () => {
    const codec = countingCodec();
    const halfWriting = {
      ...codec,
      writeUpsertItems: (item: TestRecord, out: JsonWriter) => {
        out.jsonText(`{"mode":"start","req":{"start":{"project_id":"acme/demo","id":"${item.id}"}}}`);
        if (item.payload === 'bad') throw new TypeError('cannot write this one');
        out.comma();
        out.jsonText(`{"mode":"end","req":{"end":{"project_id":"acme/demo","id":"${item.id}"}}}`);
      },
    };
    const transport = new FakeTransport();
    batcher = createBatcher(batcherOptions(transport, halfWriting));
    batcher.add(record(1));
    batcher.add(record(2, 'bad'));
    batcher.add(record(3));
    await batcher.forceFlush();
    expect(transport.allIds()).toEqual([record(1).id, record(3).id]);
    expect(JSON.parse(transport.posted[0]!.body).batch).toHaveLength(4);
    expect(batcher.stats()).toMatchObject({ delivered: 2, dropped: { rejected: 1 }, queuedBytes: 0 });
  });

  it('holds a serialised record at its UTF-8 size against maxQueueBytes', async () => {
    const held = deferred<SendOutcome>();
    const { batcher } = setup({ flushIntervalMs: 10 }, () => held.promise);
    const payload = '😀' + 'é'.repeat(20_000);
    batcher.add(record(1, payload));
    await vi.advanceTimersByTimeAsync(20);
    await new Promise((resolve) => setImmediate(resolve));
    // In flight now, so serialised: held at the bytes its items take (2 per é, 4 for the emoji).
    expect(batcher.stats().inFlight).toBe(1);
    const itemBytes = toUpsertBytes(record(1, payload));
    expect(batcher.stats().queuedBytes).toBe(itemBytes);
    held.resolve(OK);
    await batcher.forceFlush();
    expect(batcher.stats().queuedBytes).toBe(0);
  });
});

/** What the counting codec's items of `item` take in a body, without the separating comma. */
function toUpsertBytes(item: TestRecord): number {
  return Buffer.byteLength(countingCodec().toUpsertItems(item).map((part) => JSON.stringify(part)).join(','));
}

describe('nothing heavy inside add() (SPEC §4.2, §6 stall target)', () => {
  it('neither maps, stringifies nor posts inside add(), even when add() fills batches', async () => {
    const { transport, codec, batcher } = setup({ maxBatchItems: 10 });
    addRecords(batcher, 0, 25);
    // Five batches are full, but add() only queued them: the work starts in a later macrotask.
    expect(codec.mapped).toBe(0);
    expect(transport.posted).toHaveLength(0);
    expect(batcher.stats()).toMatchObject({ queued: 25, inFlight: 0 });
    await settle();
    expect(codec.mapped).toBe(25);
    expect(transport.posted.map((request) => request.ids.length)).toEqual([5, 5, 5, 5, 5]);
    // The reply (one entry per item) is never used: the transport is told not to parse it.
    expect(transport.posted.every((request) => request.options?.discardBody === true)).toBe(true);
  });

  it('nor inside forceFlush()', async () => {
    const { transport, codec, batcher } = setup({ flushIntervalMs: 60_000 });
    addRecords(batcher, 0, 3);
    const flushed = batcher.forceFlush();
    expect(codec.mapped).toBe(0);
    expect(transport.posted).toHaveLength(0);
    await flushed;
    expect(transport.posted).toHaveLength(1);
  });

  it('builds a big batch in time slices, yielding to the event loop between them', async () => {
    vi.useRealTimers();
    // Each record costs at least MAPPING_MS to map, and a slice stops once SLICE_BUDGET_MS is
    // spent, so it holds at most ceil(SLICE_BUDGET_MS / MAPPING_MS) records (3 with 0.25 ms).
    const { transport, batcher, mappedPerTurn } = slowlyMappingBatcher({ maxBatchItems: 200 });
    addRecords(batcher, 0, 100);
    const perTurn = await mappedPerTurn(() => batcher.forceFlush());
    expect(transport.posted.map((request) => request.ids.length)).toEqual([100]);
    expect(perTurn.length).toBeGreaterThanOrEqual(100 / Math.ceil(SLICE_BUDGET_MS / MAPPING_MS));
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(Math.ceil(SLICE_BUDGET_MS / MAPPING_MS));
    expect(SLICE_BUDGET_MS).toBeLessThanOrEqual(0.3);
  });
});

/** Each record takes at least this long to map in `slowlyMappingBatcher`. */
const MAPPING_MS = 0.1;

/**
 * A batcher whose codec busy-waits `MAPPING_MS` per record, and a way to see how many records
 * were mapped in each turn of the (real) event loop while `work` runs.
 */
function slowlyMappingBatcher(delivery: DeliveryOptions, script?: Script) {
  let turns = 0;
  let ticking = false;
  const tick = (): void => {
    turns += 1;
    if (ticking) setImmediate(tick);
  };
  const turnOfEachRecord: number[] = [];
  const codec = countingCodec();
  const map = codec.toUpsertItems.bind(codec);
  codec.toUpsertItems = (item) => {
    turnOfEachRecord.push(turns);
    for (const until = performance.now() + MAPPING_MS; performance.now() < until; ) {
      // busy: a span whose mapping takes a while
    }
    return map(item);
  };
  const turnOfEachPost: number[] = [];
  const transport = new FakeTransport((request, index) => {
    turnOfEachPost.push(turns);
    return script === undefined ? OK : script(request, index);
  });
  const created = createBatcher(batcherOptions(transport, codec, delivery));
  batcher = created;
  /** Records mapped in each turn that mapped any, while `work` runs (requests: `postedPerTurn`). */
  async function mappedPerTurn(work: () => Promise<unknown>): Promise<number[]> {
    turnOfEachRecord.length = 0;
    turnOfEachPost.length = 0;
    ticking = true;
    setImmediate(tick);
    try {
      await work();
    } finally {
      ticking = false;
    }
    return countPerTurn(turnOfEachRecord);
  }
  /** Requests posted in each turn that posted any, during the last `mappedPerTurn`. */
  const postedPerTurn = (): number[] => countPerTurn(turnOfEachPost);
  return { transport, batcher: created, mappedPerTurn, postedPerTurn };
}

function countPerTurn(turns: readonly number[]): number[] {
  const perTurn = new Map<number, number>();
  for (const turn of turns) perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1);
  return [...perTurn.values()];
}

describe('back-pressure: longer slices while the queue fills faster than it drains (backpressureMs)', () => {
  // 100 records of ~200 bytes held against 40 000: past the quarter of the bound where
  // back-pressure applies, for the whole build.
  const PRESSED = { maxBatchItems: 200, maxQueueBytes: 40_000 };

  it('maps in slices of up to backpressureMs, so the producer gets fewer turns', async () => {
    vi.useRealTimers();
    const { transport, batcher, mappedPerTurn } = slowlyMappingBatcher({ ...PRESSED, backpressureMs: 2 });
    addRecords(batcher, 0, 100);
    const perTurn = await mappedPerTurn(() => batcher.forceFlush());
    expect(transport.posted.map((request) => request.ids.length)).toEqual([100]);
    expect(Math.max(...perTurn)).toBeGreaterThan(Math.ceil(SLICE_BUDGET_MS / MAPPING_MS));
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(Math.ceil(2 / MAPPING_MS));
    // Why the producer was slower, once per interval: after the flush, through diag.info.
    expect(logged.filter((line) => line.level === 'info').map((line) => line.message)).toEqual([
      expect.stringMatching(/gave \d+ ms to delivery over the last 1 s to keep up \(backpressureMs\)/),
    ]);
  });

  it('tells onBatchSettled once per settled batch, once its bytes are released', async () => {
    const settledAt: Array<{ delivered: number; queuedBytes: number }> = [];
    const transport = new FakeTransport();
    batcher = createBatcher({
      ...batcherOptions(transport, countingCodec(), { maxBatchItems: 10 }),
      onBatchSettled: () => settledAt.push(batcher!.stats()),
    });
    addRecords(batcher, 0, 12);
    await batcher.forceFlush();
    expect(settledAt.map((stats) => stats.delivered)).toEqual([5, 10, 12]);
    expect(settledAt.at(-1)?.queuedBytes).toBe(0);
  });

  it('says it delivers while a batch is built, sent or answered, not while the only ones left wait out a backoff', async () => {
    const answers = [deferred<SendOutcome>(), deferred<SendOutcome>(), deferred<SendOutcome>()];
    const transport = new FakeTransport((_request, index) => answers[index]!.promise);
    const told: boolean[] = [];
    // One span per batch (a span is two items), two batches at a time.
    batcher = createBatcher({
      ...batcherOptions(transport, countingCodec(), { maxBatchItems: 2, concurrency: 2 }),
      onDeliveringChanged: (delivering) => told.push(delivering),
    });
    addRecords(batcher, 0, 2);
    // add() never starts a send itself (SPEC §6): nothing has started yet.
    expect(told).toEqual([]);
    const flushed = batcher.forceFlush();
    await settle();
    expect(transport.posted).toHaveLength(2);
    expect(told).toEqual([true]);
    // The first waits out a backoff (250 ms: random() is 0.5) while the second is on the wire.
    answers[0]!.resolve(UNAVAILABLE);
    await settle();
    expect(told).toEqual([true]);
    answers[1]!.resolve(OK);
    await settle();
    // Only a backoff is left: a record in flight, nothing delivering.
    expect(batcher.stats()).toMatchObject({ inFlight: 1, delivered: 1 });
    expect(told).toEqual([true, false]);
    await settle(1000);
    expect(transport.posted).toHaveLength(3);
    expect(told).toEqual([true, false, true]);
    answers[2]!.resolve(OK);
    await flushed;
    await settle();
    expect(told).toEqual([true, false, true, false]);
  });

  it('does not say it stopped delivering between one batch and the next', async () => {
    const transport = new FakeTransport();
    const told: boolean[] = [];
    batcher = createBatcher({
      ...batcherOptions(transport, countingCodec(), { maxBatchItems: 2, concurrency: 1 }),
      onDeliveringChanged: (delivering) => told.push(delivering),
    });
    addRecords(batcher, 0, 5);
    await batcher.forceFlush();
    await settle();
    expect(transport.posted).toHaveLength(5);
    expect(told).toEqual([true, false]);
  });

  it('leaves a record it cannot write ahead for its batch, so a flush begun meanwhile still ends', async () => {
    vi.useRealTimers();
    const codec = countingCodec();
    const map = codec.toUpsertItems.bind(codec);
    codec.toUpsertItems = (item) => {
      if (item.id === record(7).id) throw new Error('cannot map this one');
      return map(item);
    };
    const firstAnswer = deferred<SendOutcome>();
    const transport = new FakeTransport((_request, index) => (index === 0 ? firstAnswer.promise : OK));
    // 20 records of ~200 bytes against 8000: past the mark. Batches of 5; record 7 is in the second,
    // written ahead while the first is taken.
    batcher = createBatcher(batcherOptions(transport, codec, { maxQueueBytes: 8000, maxBatchItems: 10, concurrency: 1, backpressureMs: 2 }));
    addRecords(batcher, 0, 20);
    await vi.waitFor(() => expect(transport.posted).toHaveLength(1));
    const flushed = batcher.forceFlush();
    firstAnswer.resolve(OK);
    expect(await settleWithin(flushed, 5000)).toBe(true);
    expect(batcher.stats()).toMatchObject({ delivered: 19, dropped: { rejected: 1 }, queued: 0, inFlight: 0, queuedBytes: 0 });
  });

  it('drains more than a batch per turn: the slice goes on with the next batch and the records after it', async () => {
    vi.useRealTimers();
    // Batches of 5 records: one batch per turn would drain 5 records a turn, however long the slice.
    const { transport, batcher, mappedPerTurn, postedPerTurn } = slowlyMappingBatcher({ ...PRESSED, maxBatchItems: 10, backpressureMs: 2 });
    addRecords(batcher, 0, 100);
    const perTurn = await mappedPerTurn(() => batcher.forceFlush());
    expect(transport.posted.flatMap((request) => request.ids)).toHaveLength(100);
    expect(transport.posted.every((request) => request.ids.length <= 5)).toBe(true);
    // Taken and sent in the same slice while send slots are free (concurrency 4), not one a turn.
    expect(Math.max(...postedPerTurn())).toBeGreaterThan(1);
    // (A turn may see the end of one build and the start of the next: up to 6 records without this.)
    expect(Math.max(...perTurn)).toBeGreaterThan(2 * 5);
    expect(batcher.stats()).toMatchObject({ delivered: 100, queued: 0, inFlight: 0, queuedBytes: 0 });
  });

  it('keeps short slices below the mark, with backpressureMs 0, and while the service is failing', async () => {
    vi.useRealTimers();
    const short = Math.ceil(SLICE_BUDGET_MS / MAPPING_MS);

    const unpressed = slowlyMappingBatcher({ ...PRESSED, maxQueueBytes: 1_000_000, backpressureMs: 2 });
    addRecords(unpressed.batcher, 0, 100);
    expect(Math.max(...(await unpressed.mappedPerTurn(() => unpressed.batcher.forceFlush())))).toBeLessThanOrEqual(short);

    const off = slowlyMappingBatcher({ ...PRESSED, backpressureMs: 0 });
    addRecords(off.batcher, 0, 100);
    expect(Math.max(...(await off.mappedPerTurn(() => off.batcher.forceFlush())))).toBeLessThanOrEqual(short);

    // The first request gets a 503 and waits in backoff (random 0.5: 250 ms); the records added
    // meanwhile are built while the batcher is retrying.
    let answer: SendOutcome = UNAVAILABLE;
    const failing = slowlyMappingBatcher({ ...PRESSED, backpressureMs: 2 }, () => answer);
    failing.batcher.add(record(1000));
    void failing.batcher.forceFlush();
    await vi.waitFor(() => expect(failing.transport.posted).toHaveLength(1));
    expect(failing.batcher.isRetrying()).toBe(true);
    addRecords(failing.batcher, 0, 100);
    const perTurn = await failing.mappedPerTurn(async () => {
      const flushed = failing.batcher.forceFlush();
      await vi.waitFor(() => expect(failing.transport.posted).toHaveLength(2));
      answer = OK;
      await flushed;
    });
    expect(Math.max(...perTurn)).toBeLessThanOrEqual(short);
    expect(failing.batcher.isRetrying()).toBe(false);
    expect(failing.batcher.stats()).toMatchObject({ delivered: 101, queued: 0, inFlight: 0 });
  });
});

describe('bounded memory (SPEC §4.3)', () => {
  it('keeps no reference to a span once it is delivered or dropped', async () => {
    vi.useRealTimers();
    const { setFlagsFromString } = await import('node:v8');
    const { runInNewContext } = await import('node:vm');
    setFlagsFromString('--expose-gc');
    const collect = runInNewContext('gc') as () => void;
    const { batcher } = setup({ maxBatchItems: 20 }, (request) =>
      request.ids.includes(record(7).id) ? { kind: 'reject', status: 400, reason: 'bad span' } : OK,
    );
    // Made in a function of their own, so no local of this (suspended) test function holds one.
    const addWatched = (): Array<WeakRef<object>> =>
      Array.from({ length: 40 }, (_, index) => {
        const item = record(index, 'p'.repeat(1000));
        batcher.add(item);
        return new WeakRef(item);
      });
    const refs = addWatched();
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ delivered: 39, dropped: { rejected: 1 }, queued: 0, inFlight: 0 });
    // WeakRef targets stay alive until the current job ends.
    await new Promise<void>((resolve) => setImmediate(resolve));
    collect();
    expect(refs.map((ref, index) => (ref.deref() === undefined ? -1 : index)).filter((index) => index >= 0)).toEqual([]);
  });

  it('keeps queued plus in-flight bytes under maxQueueBytes and counts queue_full', async () => {
    const gate = deferred<SendOutcome>();
    const { transport, batcher } = setup({ maxQueueBytes: 50_000, maxBatchItems: 20, concurrency: 1 }, () => gate.promise);
    let peak = 0;
    for (let index = 0; index < 500; index += 1) {
      batcher.add(record(index, 'x'.repeat(300)));
      await settle();
      peak = Math.max(peak, batcher.stats().queuedBytes);
    }
    expect(peak).toBeLessThanOrEqual(50_000);
    const stalled = batcher.stats();
    expect(stalled.dropped.queue_full).toBeGreaterThan(0);
    expect(stalled.inFlight).toBe(10);
    gate.resolve(OK);
    await batcher.forceFlush();
    const final = batcher.stats();
    expect(final.delivered + final.dropped.queue_full).toBe(500);
    expect(final).toMatchObject({ queued: 0, inFlight: 0, queuedBytes: 0 });
    expect(new Set(transport.allIds()).size).toBe(final.delivered);
  });

  // CJK text weighs 3 bytes a character in JSON, a control character 6; the guess counts 1.
  it('keeps the bound when records weigh several times their size guess, by learning the ratio', async () => {
    const gate = deferred<SendOutcome>();
    // The batches the two send slots take (200 records, ~10 windows of weighing each) are weighed
    // while their requests hang.
    const { codec, batcher } = setup({ maxQueueBytes: 4_000_000, maxBatchItems: 400, concurrency: 2 }, () => gate.promise);
    const weight = (item: TestRecord): number => toUpsertBytes(item) + 1;
    codec.estimateBytes = (item) => Math.ceil(weight(item) / 3);
    let admitted = 0;
    for (let index = 0; index < 4000; index += 1) {
      const item = record(index, 'x'.repeat(3000));
      if (batcher.add(item)) admitted += weight(item);
      // Spans come over many turns of the event loop, as an application makes them.
      if (index % 10 === 9) await settle();
    }
    // The ratio of weight to guess (3), not more: an overshoot would refuse spans with room left.
    expect(batcher.sizeCorrection()).toBeGreaterThan(2.5);
    expect(batcher.sizeCorrection()).toBeLessThan(3.5);
    // Only what was admitted before the first records were weighed exceeds the bound; and the
    // bound is used, not refused early.
    expect(admitted).toBeLessThanOrEqual(4_000_000 * 1.25);
    expect(admitted).toBeGreaterThanOrEqual(4_000_000 * 0.75);
    expect(batcher.stats().dropped.queue_full).toBeGreaterThan(0);
    gate.resolve(OK);
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ queued: 0, inFlight: 0, queuedBytes: 0 });
  });

  it('leaves guesses as they are for records lighter than guessed, and lets a correction fall back', async () => {
    const { codec, batcher } = setup({ maxBatchItems: 20, flushIntervalMs: 10 });
    const estimate = codec.estimateBytes;
    let heavy = true;
    codec.estimateBytes = (item) => (heavy ? Math.ceil(toUpsertBytes(item) / 4) : estimate(item) * 2);
    for (let index = 0; index < 200; index += 1) batcher.add(record(index, 'x'.repeat(1500)));
    await settle(20);
    await batcher.forceFlush();
    expect(batcher.sizeCorrection()).toBeGreaterThan(3);
    heavy = false;
    for (let round = 0; round < 10; round += 1) {
      for (let index = 0; index < 100; index += 1) batcher.add(record(1000 + round * 100 + index, 'x'.repeat(1500)));
      await settle(20);
      await batcher.forceFlush();
    }
    expect(batcher.sizeCorrection()).toBe(1);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY])('charges a record whose size guess is %s as a full batch, so the bound still holds', async (guess) => {
    const gate = deferred<SendOutcome>();
    const { codec, batcher } = setup({ maxQueueBytes: 50_000, maxBatchBytes: 10_000, maxBatchItems: 20, concurrency: 1 }, () => gate.promise);
    const estimate = codec.estimateBytes;
    codec.estimateBytes = (item) => (item.id === record(0).id ? guess : estimate(item));
    batcher.add(record(0));
    expect(batcher.stats().queuedBytes).toBe(10_000);
    for (let index = 1; index < 500; index += 1) {
      batcher.add(record(index, 'x'.repeat(300)));
      await settle();
    }
    const stalled = batcher.stats();
    expect(stalled.queuedBytes).toBeLessThanOrEqual(50_000);
    expect(stalled.dropped.queue_full).toBeGreaterThan(0);
    gate.resolve(OK);
    await batcher.forceFlush();
    const final = batcher.stats();
    expect(final.delivered + final.dropped.queue_full).toBe(500);
    expect(final).toMatchObject({ queued: 0, inFlight: 0, queuedBytes: 0 });
  });
});

describe('concurrency (SPEC §4.4)', () => {
  it('has at most `concurrency` requests in flight; the others wait and then succeed', async () => {
    const gates: Array<ReturnType<typeof deferred<SendOutcome>>> = [];
    const { transport, batcher } = setup({ maxBatchItems: 2, concurrency: 3 }, () => {
      const gate = deferred<SendOutcome>();
      gates.push(gate);
      return gate.promise;
    });
    addRecords(batcher, 0, 10);
    await settle();
    expect(transport.outstanding).toBe(3);
    expect(batcher.stats()).toMatchObject({ inFlight: 3, queued: 7 });
    for (let round = 0; round < 10 && batcher.stats().delivered < 10; round += 1) {
      expect(transport.outstanding).toBeLessThanOrEqual(3);
      for (const gate of gates.splice(0)) gate.resolve(OK);
      await settle();
    }
    expect(transport.maxOutstanding).toBe(3);
    expect(batcher.stats()).toMatchObject({ delivered: 10, dropped: { retries_exhausted: 0 } });
  });
});

describe('retries (SPEC §4.5)', () => {
  // Retry-After: 0 backs off as no Retry-After does: without the backoff's floor, every refusal
  // would be sent again at once (at fake time 0 here).
  it.each([
    ['503s', UNAVAILABLE],
    ['429s with Retry-After: 0', { kind: 'retry', status: 429, afterMs: 0, reason: 'HTTP 429' } as const],
  ])('retries %s with growing jittered delays, then delivers', async (_name, refusal) => {
    const { transport, batcher } = setup({ flushIntervalMs: 0 }, (_request, index) => (index < 3 ? refusal : OK));
    batcher.add(record(1));
    await settle();
    expect(transport.posted).toHaveLength(1);
    // random() = 0.5: delays 250, 500, 1000 ms.
    await settle(249);
    expect(transport.posted).toHaveLength(1);
    await settle(1);
    expect(transport.posted).toHaveLength(2);
    await settle(499);
    expect(transport.posted).toHaveLength(2);
    await settle(1);
    expect(transport.posted).toHaveLength(3);
    await settle(1000);
    expect(transport.posted).toHaveLength(4);
    expect(batcher.stats()).toMatchObject({ delivered: 1, retried: 3, batchesSent: 1 });
  });

  it('waits out a Retry-After longer than its own backoff', async () => {
    const { transport, batcher } = setup({ flushIntervalMs: 0 }, (_request, index) =>
      index === 0 ? { kind: 'retry', status: 429, afterMs: 7000, reason: 'HTTP 429' } : OK,
    );
    batcher.add(record(1));
    await settle(6999);
    expect(transport.posted).toHaveLength(1);
    await settle(1);
    expect(transport.posted).toHaveLength(2);
    expect(batcher.stats().delivered).toBe(1);
  });

  it('gives up after maxRetryMs and counts retries_exhausted', async () => {
    const { batcher } = setup({ flushIntervalMs: 0, maxRetryMs: 5000 }, () => UNAVAILABLE);
    addRecords(batcher, 0, 4);
    const flushed = batcher.forceFlush();
    await settle(10_000);
    await flushed;
    expect(batcher.stats()).toMatchObject({ delivered: 0, dropped: { retries_exhausted: 4 }, inFlight: 0 });
  });

  it('cuts the last wait short to try once more at the deadline, then gives up (503s)', async () => {
    const { transport, batcher } = setup({ flushIntervalMs: 0, maxRetryMs: 3000 }, () => UNAVAILABLE);
    batcher.add(record(1));
    // random() = 0.5: attempts at 0, 250, 750 and 1750 ms; the next delay (2000 ms) would end past
    // the deadline, so the wait ends at it: a fifth attempt at 3000 ms.
    await settle(1750);
    expect(transport.posted).toHaveLength(4);
    await settle(1249);
    expect(transport.posted).toHaveLength(4);
    expect(batcher.stats().dropped.retries_exhausted).toBe(0);
    await settle(1);
    expect(transport.posted).toHaveLength(5);
    expect(batcher.stats()).toMatchObject({ delivered: 0, retried: 4, inFlight: 0, dropped: { retries_exhausted: 1 } });
  });

  it('with a Retry-After longer than maxRetryMs, tries once more at the deadline rather than giving up at once', async () => {
    const { transport, batcher } = setup({ flushIntervalMs: 0, maxRetryMs: 3000 }, (_request, index) =>
      index === 0 ? { kind: 'retry', status: 429, afterMs: 10_000, reason: 'HTTP 429' } : OK,
    );
    batcher.add(record(1));
    await settle(2999);
    expect(transport.posted).toHaveLength(1);
    expect(batcher.stats()).toMatchObject({ delivered: 0, inFlight: 1, dropped: { retries_exhausted: 0 } });
    await settle(1);
    expect(transport.posted).toHaveLength(2);
    expect(batcher.stats()).toMatchObject({ delivered: 1, inFlight: 0, dropped: { retries_exhausted: 0 } });
  });

  it('does not retry at all with maxRetryMs 0: no time is left for another attempt', async () => {
    const { transport, batcher } = setup({ flushIntervalMs: 0, maxRetryMs: 0 }, () => ({
      kind: 'retry',
      afterMs: 10,
      reason: 'ECONNRESET',
    }));
    batcher.add(record(1));
    await batcher.forceFlush();
    expect(transport.posted).toHaveLength(1);
    expect(batcher.stats().dropped.retries_exhausted).toBe(1);
  });
});

describe('413 (SPEC §4.6)', () => {
  const tooLargeOver = (limit: number): Script => (request) =>
    Buffer.byteLength(request.body) > limit ? { kind: 'split', status: 413, reason: 'Request too large' } : OK;

  it('splits in halves until the pieces fit, delivering everything once', async () => {
    const { transport, batcher } = setup({}, tooLargeOver(3000));
    addRecords(batcher, 0, 40, 'y'.repeat(100));
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ delivered: 40, dropped: { too_large: 0 } });
    const acknowledged = transport.posted.filter((request) => Buffer.byteLength(request.body) <= 3000);
    expect(acknowledged.flatMap((request) => request.ids).sort()).toEqual(
      Array.from({ length: 40 }, (_, index) => record(index).id).sort(),
    );
  });

  it('builds later batches to half the body it refused, so a lower limit in front costs one split, not one per batch', async () => {
    const { transport, batcher } = setup({}, tooLargeOver(3000));
    addRecords(batcher, 0, 40, 'y'.repeat(100));
    await batcher.forceFlush();
    const refusedFirst = transport.posted.filter((request) => Buffer.byteLength(request.body) > 3000).length;
    expect(refusedFirst).toBeGreaterThan(0);
    // Said once per halving (a half refused like its twin adds nothing), with what to change.
    const warnings = logged.filter((line) => line.level === 'warn').map((line) => line.message);
    expect(warnings.length).toBeGreaterThan(0);
    expect(warnings.length).toBeLessThanOrEqual(refusedFirst);
    expect(warnings[0]).toMatch(
      /^callbridge: the service refused a request of \d+ bytes for its size \(Request too large\); requests are built to \d+ bytes from now on \(maxBatchBytes 10485760\)\. A proxy's body limit below maxBatchBytes is the usual cause/,
    );

    // The next spans go in batches that fit: no request refused, every span delivered once.
    const sentBefore = transport.posted.length;
    addRecords(batcher, 40, 200, 'y'.repeat(100));
    await batcher.forceFlush();
    const later = transport.posted.slice(sentBefore);
    expect(later.filter((request) => Buffer.byteLength(request.body) > 3000)).toEqual([]);
    expect(later.length).toBeGreaterThan(1);
    expect(later.flatMap((request) => request.ids).sort()).toEqual(Array.from({ length: 200 }, (_, index) => record(40 + index).id).sort());
    expect(batcher.stats()).toMatchObject({ delivered: 240, dropped: { too_large: 0 } });
    expect(logged.filter((line) => line.level === 'warn')).toHaveLength(warnings.length);
  });

  it('cuts a single span the service refuses to the size it learnt, not only to a quarter of its own', async () => {
    const { transport, batcher } = setup({}, tooLargeOver(3000));
    addRecords(batcher, 0, 40, 'y'.repeat(100));
    await batcher.forceFlush();
    const sentBefore = transport.posted.length;
    // ~20 KB: a quarter of it (~5 KB) would still be refused, and the span dropped.
    batcher.add(record(100, 'z'.repeat(20_000)));
    await batcher.forceFlush();
    const sizes = transport.posted.slice(sentBefore).map((request) => Buffer.byteLength(request.body));
    expect(sizes).toHaveLength(2);
    expect(sizes[1]).toBeLessThanOrEqual(3000);
    expect(batcher.stats()).toMatchObject({ delivered: 41, dropped: { too_large: 0 } });
  });

  it('learns nothing from a 413 on a single span (its size is its own)', async () => {
    // maxBatchItems counts items: two per span (start and end).
    const { transport, batcher } = setup({ maxBatchItems: 8 }, tooLargeOver(20_000));
    batcher.add(record(1, 'z'.repeat(60_000)));
    await batcher.forceFlush();
    addRecords(batcher, 2, 4, 'y'.repeat(6000));
    await batcher.forceFlush();
    // The four ~6 KB spans still go as one ~24 KB batch... which is refused and split as before.
    const sizes = transport.posted.slice(2).map((request) => request.ids.length);
    expect(sizes[0]).toBe(4);
    expect(batcher.stats()).toMatchObject({ delivered: 5, dropped: { too_large: 0 } });
  });

  it('bounds a split batch and all its halves by one maxRetryMs deadline', async () => {
    // The whole batch is too large; each half is refused with 503 for ever.
    const { batcher } = setup({ flushIntervalMs: 0, maxRetryMs: 5000 }, (request) =>
      request.ids.length > 1 ? { kind: 'split', status: 413, reason: 'Request too large' } : UNAVAILABLE,
    );
    addRecords(batcher, 0, 2);
    let flushed = false;
    const flush = batcher.forceFlush().then(() => {
      flushed = true;
    });
    // random() = 0.5: the first half retries at 250, 750, 1750, 3750 ms and gives up (the next
    // delay would pass 5000 ms); the second half starts then, on the same clock.
    await settle(5000);
    expect(flushed).toBe(true);
    await flush;
    expect(batcher.stats()).toMatchObject({ delivered: 0, inFlight: 0, dropped: { retries_exhausted: 2 } });
  });

  it('cuts the largest strings of a single span still too large and sends it once more', async () => {
    const { transport, batcher } = setup({}, tooLargeOver(20_000));
    batcher.add(record(1, 'z'.repeat(60_000)));
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ delivered: 1, dropped: { too_large: 0 } });
    const last = transport.posted.at(-1)!;
    expect(JSON.parse(last.body).batch[0].req.start.payload).toMatch(/…\[truncated \d+ bytes\]$/);
    // Not a drop, but not silent either: the call will not hold all its text.
    expect(logged.filter((line) => line.level === 'warn').map((line) => line.message)).toEqual([
      expect.stringMatching(/^callbridge: the service refused a span of \d+ bytes for its size \(Request too large\); its largest strings were cut to \d+ bytes and it is sent once more$/),
    ]);
  });

  it('drops as too_large a span that still gets 413 after cutting, without blocking the others', async () => {
    const { batcher } = setup({ maxBatchItems: 4 }, tooLargeOver(300));
    batcher.add(record(1, 'z'.repeat(60_000)));
    batcher.add(record(2));
    batcher.add(record(3));
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ delivered: 2, dropped: { too_large: 1 } });
  });

  describe('an upload the server cuts (an early 413 whose answer the reset destroyed)', () => {
    const cutOver = (limit: number): Script => (request) =>
      Buffer.byteLength(request.body) > limit
        ? { kind: 'retry', reason: 'write ECONNRESET', code: 'ECONNRESET', cutDuringUpload: true }
        : OK;

    it('splits a batch cut twice in a row, and cuts then drops a single span that stays too large', async () => {
      const { transport, batcher } = setup({ maxBatchItems: 40 }, cutOver(3000));
      addRecords(batcher, 0, 19, 'y'.repeat(100));
      batcher.add(record(99, 'z'.repeat(60_000)));
      const flush = batcher.forceFlush();
      await settle(60_000);
      await flush;
      expect(batcher.stats()).toMatchObject({ delivered: 19, dropped: { too_large: 1, retries_exhausted: 0 } });
      const first = transport.posted[0]!;
      // Once is a blip (retried as is), twice in a row is the size: the same body went twice.
      expect(transport.posted[1]!.body).toBe(first.body);
      expect(transport.posted[2]!.ids.length).toBeLessThan(first.ids.length);
    });

    it('splits a batch an outage cut twice, but builds the next batches whole (a cut teaches no size)', async () => {
      let outage = true;
      const { transport, batcher } = setup({ maxBatchItems: 40 }, (request) =>
        outage && request.ids.length > 1 ? { kind: 'retry', reason: 'write ECONNRESET', code: 'ECONNRESET', cutDuringUpload: true } : OK,
      );
      addRecords(batcher, 0, 20, 'y'.repeat(100));
      const flush = batcher.forceFlush();
      await settle(60_000);
      await flush;
      outage = false;
      const sentBefore = transport.posted.length;
      addRecords(batcher, 20, 20, 'y'.repeat(100));
      await batcher.forceFlush();
      expect(transport.posted.slice(sentBefore).map((request) => request.ids.length)).toEqual([20]);
      expect(batcher.stats()).toMatchObject({ delivered: 40, dropped: { too_large: 0 } });
      expect(logged.filter((line) => line.message.includes('requests are built to'))).toEqual([]);
    });

    it('keeps a single span whole while even an empty request is cut (an outage resetting mid-body), and delivers it after', async () => {
      let outage = true;
      const { transport, batcher } = setup({}, () =>
        outage ? { kind: 'retry', reason: 'write ECONNRESET', code: 'ECONNRESET', cutDuringUpload: true } : OK,
      );
      batcher.add(record(1, 'z'.repeat(60_000)));
      const flush = batcher.forceFlush();
      await settle(20_000);
      outage = false;
      await settle(60_000);
      await flush;
      expect(batcher.stats()).toMatchObject({ delivered: 1, dropped: { too_large: 0 } });
      const last = transport.posted.at(-1)!;
      expect(JSON.parse(last.body).batch[0].req.start.payload).toBe('z'.repeat(60_000));
      // Probes (no records) were sent after cuts in a row, and none of them made the span shrink.
      expect(transport.posted.some((request) => request.ids.length === 0)).toBe(true);
    });

    it('retries a single cut as a network error and sends the batch whole when the next attempt works', async () => {
      let calls = 0;
      const { transport, batcher } = setup({}, () =>
        calls++ === 0 ? { kind: 'retry', reason: 'write ECONNRESET', code: 'ECONNRESET', cutDuringUpload: true } : OK,
      );
      addRecords(batcher, 0, 10);
      const flush = batcher.forceFlush();
      await settle(60_000);
      await flush;
      expect(batcher.stats()).toMatchObject({ delivered: 10, retried: 1 });
      expect(transport.posted.map((request) => request.ids.length)).toEqual([10, 10]);
    });
  });

  it('cuts a span over maxBatchBytes before sending it, or drops it as too_large', async () => {
    const { transport, batcher } = setup({ maxBatchBytes: 4000 });
    batcher.add(record(1, 'w'.repeat(50_000)));
    await batcher.forceFlush();
    expect(batcher.stats().delivered).toBe(1);
    expect(Buffer.byteLength(transport.posted[0]!.body)).toBeLessThanOrEqual(4000);
    // A record made of many small strings cannot be cut below the limit.
    const { batcher: second } = setup({ maxBatchBytes: 150 });
    second.add(record(2, 'v'.repeat(50)));
    await second.forceFlush();
    expect(second.stats()).toMatchObject({ delivered: 0, dropped: { too_large: 1 } });
  });
});

describe('400/422 isolation (SPEC §4.7)', () => {
  it('delivers the good spans and drops only the rejected ones, with the reason', async () => {
    const { transport, batcher } = setup({ maxBatchItems: 100 }, (request) =>
      request.body.includes('poison')
        ? { kind: 'reject', status: 400, reason: 'Invalid call id: poison' }
        : OK,
    );
    for (let index = 0; index < 30; index += 1) batcher.add(record(index, index === 7 || index === 21 ? 'poison' : ''));
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ delivered: 28, dropped: { rejected: 2 } });
    const delivered = transport.posted.filter((request) => !request.body.includes('poison')).flatMap((r) => r.ids);
    expect(new Set(delivered).size).toBe(28);
    await settle(60_000);
    expect(logged.filter((entry) => entry.level === 'warn').map((entry) => entry.message)).toEqual([
      expect.stringMatching(/rejected=2 \(last: Invalid call id: poison\)/),
    ]);
  });
});

describe('401/403 (SPEC §4.8)', () => {
  it('does not retry, drops as auth and logs one error naming the URL and user', async () => {
    const { transport, batcher } = setup({ maxBatchItems: 2, flushIntervalMs: 0 }, () => ({
      kind: 'auth',
      status: 401,
      reason: 'Unauthorized',
    }));
    addRecords(batcher, 0, 6);
    await batcher.forceFlush();
    expect(transport.posted).toHaveLength(6);
    expect(batcher.stats()).toMatchObject({ delivered: 0, retried: 0, dropped: { auth: 6 } });
    const errors = logged.filter((entry) => entry.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toContain('http://127.0.0.1:9');
    expect(errors[0]!.message).toContain('"dev"');
  });
});

describe('complete mode (SPEC §4.9)', () => {
  it('switches on CALLS_COMPLETE_MODE_REQUIRED, re-sends the batch as completed calls and stays switched', async () => {
    const { transport, batcher } = setup({ maxBatchItems: 10 }, (request) =>
      request.path === '/call/upsert_batch'
        ? { kind: 'reject', status: 400, reason: 'complete mode', errorCode: 'CALLS_COMPLETE_MODE_REQUIRED' }
        : OK,
    );
    addRecords(batcher, 0, 5);
    await batcher.forceFlush();
    addRecords(batcher, 5, 15);
    await batcher.forceFlush();
    expect(transport.posted.map((request) => request.path)).toEqual([
      '/call/upsert_batch',
      '/v2/acme/demo/calls/complete',
      '/v2/acme/demo/calls/complete',
      '/v2/acme/demo/calls/complete',
    ]);
    // In complete mode a span is one item, so 10 spans fill a batch.
    expect(transport.posted.slice(1).map((request) => request.ids.length)).toEqual([5, 10, 5]);
    expect(batcher.stats()).toMatchObject({ delivered: 20, dropped: { rejected: 0 } });
  });
});

describe('forceFlush and shutdown (SPEC §4.11)', () => {
  it('forceFlush waits for batches in flight and in backoff, not for spans added later', async () => {
    const late = record(99).id;
    const hanging = deferred<SendOutcome>();
    let failures = 0;
    const { transport, batcher } = setup({ flushIntervalMs: 60_000 }, (request) => {
      if (request.ids.includes(late)) return hanging.promise;
      failures += 1;
      return failures <= 2 ? UNAVAILABLE : OK;
    });
    addRecords(batcher, 0, 3);
    let flushed = false;
    const flush = batcher.forceFlush().then(() => {
      flushed = true;
    });
    await settle();
    batcher.add(record(99));
    await settle(100);
    expect(flushed).toBe(false);
    // The late span is not part of the flush: it waits for its own interval (or a later flush).
    expect(batcher.stats()).toMatchObject({ inFlight: 3, queued: 1, delivered: 0 });
    await settle(2000);
    await flush;
    expect(flushed).toBe(true);
    expect(batcher.stats()).toMatchObject({ delivered: 3, queued: 1, retried: 2 });
    const second = batcher.forceFlush();
    await settle();
    expect(batcher.stats()).toMatchObject({ delivered: 3, inFlight: 1, queued: 0 });
    hanging.resolve(OK);
    await second;
    expect(batcher.stats()).toMatchObject({ delivered: 4, inFlight: 0 });
    expect(transport.posted).toHaveLength(4);
  });

  it('batches spans added while a flush waits on a slow batch, instead of sending each alone', async () => {
    const hanging = deferred<SendOutcome>();
    const { transport, batcher } = setup({ flushIntervalMs: 1000 }, (_request, index) =>
      index === 0 ? hanging.promise : OK,
    );
    batcher.add(record(0));
    const flush = batcher.forceFlush();
    await settle();
    expect(transport.posted).toHaveLength(1);
    for (let index = 1; index <= 200; index += 1) {
      batcher.add(record(index));
      await settle();
    }
    expect(transport.posted).toHaveLength(1);
    expect(batcher.stats()).toMatchObject({ queued: 200, inFlight: 1 });
    await settle(1000);
    expect(transport.posted.map((request) => request.ids.length)).toEqual([1, 200]);
    hanging.resolve(OK);
    await flush;
    expect(batcher.stats()).toMatchObject({ delivered: 201, queued: 0, inFlight: 0, batchesSent: 2 });
  });

  it('settles an undefined record (export([undefined]) from plain JS) like any other: counted, and a flush ends', async () => {
    const { batcher } = setup();
    batcher.add(undefined as unknown as TestRecord);
    addRecords(batcher, 1, 2);
    let flushed = false;
    void batcher.forceFlush().then(() => {
      flushed = true;
    });
    await settle();
    expect(flushed).toBe(true);
    expect(batcher.stats()).toMatchObject({ delivered: 2, queued: 0, inFlight: 0, queuedBytes: 0, dropped: { rejected: 1 } });
  });

  it('forceFlush with nothing held resolves at once', async () => {
    const { batcher } = setup();
    await expect(batcher.forceFlush()).resolves.toBeUndefined();
  });

  it('shutdown flushes, closes the pool once, and is idempotent', async () => {
    const { transport, batcher } = setup({ flushIntervalMs: 60_000 });
    addRecords(batcher, 0, 5);
    const first = batcher.shutdown();
    const second = batcher.shutdown();
    await Promise.all([first, second]);
    expect(transport.closed).toBe(1);
    expect(batcher.stats().delivered).toBe(5);
    await batcher.shutdown();
    expect(transport.closed).toBe(1);
  });

  it('shutdown drops what is left as shutdown after shutdownTimeoutMs, aborting backoff', async () => {
    const { transport, batcher } = setup({ shutdownTimeoutMs: 2000, maxBatchItems: 2, concurrency: 1 }, () => UNAVAILABLE);
    addRecords(batcher, 0, 5);
    const done = batcher.shutdown();
    await settle(2000);
    await done;
    expect(batcher.stats()).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, queuedBytes: 0, dropped: { shutdown: 5 } });
    expect(transport.closed).toBe(1);
    // After shutdown, records are refused and counted.
    expect(batcher.add(record(100))).toBe(false);
    expect(batcher.stats().dropped.shutdown).toBe(6);
  });

  it('dropHeld gives up on what is queued, in a request and in backoff (counted as shutdown), and delivers what comes after', async () => {
    let serviceUp = false;
    const aborted: boolean[] = [];
    const { transport, batcher } = setup({ maxBatchItems: 2, concurrency: 2, flushIntervalMs: 60_000 }, (request, index) => {
      if (serviceUp) return OK;
      if (index > 0) return UNAVAILABLE;
      // The first request hangs until it is aborted.
      const signal = request.options!.signal!;
      return new Promise<SendOutcome>((resolve) =>
        signal.addEventListener('abort', () => {
          aborted.push(true);
          resolve({ kind: 'retry', reason: 'aborted' });
        }),
      );
    });
    addRecords(batcher, 0, 5);
    const flush = batcher.forceFlush();
    await settle(100);
    // One record per batch: one hangs, one waits out its backoff, three wait for a send slot.
    expect(batcher.stats()).toMatchObject({ inFlight: 2, queued: 3 });
    await batcher.dropHeld();
    await flush;
    expect(aborted).toEqual([true]);
    expect(batcher.stats()).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, queuedBytes: 0, dropped: { shutdown: 5 } });
    expect(logged.filter(({ level }) => level === 'warn').map(({ message }) => message)).toContain(
      'callbridge: dropped spans: shutdown=5 (last: the shutdown timeout passed while retrying (last failure: HTTP 503: HTTP 503))',
    );
    const sentBefore = transport.posted.length;
    serviceUp = true;
    addRecords(batcher, 10, 2);
    await batcher.forceFlush();
    expect(batcher.stats()).toMatchObject({ delivered: 2, queued: 0, inFlight: 0, dropped: { shutdown: 5 } });
    expect(transport.posted.slice(sentBefore).flatMap((request) => request.ids)).toEqual([record(10).id, record(11).id]);
    expect(transport.closed).toBe(0);
  });

  it('timers are unref()ed: a pending flush timer or backoff does not hold the process; shutdown holds it at most its timeout', async () => {
    vi.useRealTimers();
    const seen: boolean[] = [];
    const original = globalThis.setTimeout;
    const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((...args: Parameters<typeof setTimeout>) => {
      const timer = original(...args);
      const unref = timer.unref.bind(timer);
      seen.push(false);
      const position = seen.length - 1;
      timer.unref = () => {
        seen[position] = true;
        return unref();
      };
      return timer;
    }) as typeof setTimeout);
    try {
      const { batcher } = setup({ flushIntervalMs: 60_000, shutdownTimeoutMs: 60_000 }, () => UNAVAILABLE);
      batcher.add(record(1));
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every(Boolean)).toBe(true);
      await new Promise((resolve) => original(resolve, 20)); // into the backoff
      const before = seen.length;
      expect(seen.every(Boolean)).toBe(true);
      void batcher.shutdown(500);
      await new Promise((resolve) => original(resolve, 20));
      // Only the wait of the shutdown itself is held (its code awaits it): one timer, of its timeout.
      expect(seen.slice(0, before).every(Boolean)).toBe(true);
      expect(seen.slice(before).filter((unrefd) => !unrefd)).toHaveLength(1);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('drop reporting (SPEC §4.1)', () => {
  it('reports drops once per interval through diag, not per span', async () => {
    const { batcher } = setup({ maxQueueBytes: 1000 });
    addRecords(batcher, 0, 200);
    expect(logged.filter((entry) => entry.level === 'warn')).toHaveLength(0);
    await settle(10_000);
    const warnings = logged.filter((entry) => entry.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/queue_full=\d+/);
    expect(batcher.stats().dropped.queue_full).toBeGreaterThan(150);
    await settle(30_000);
    expect(logged.filter((entry) => entry.level === 'warn')).toHaveLength(1);
  });
});

describe('never harms the host (SPEC §4.12)', () => {
  it('sends with tracing suppressed', async () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
    onTestFinished(() => {
      context.disable();
    });
    const suppressed: boolean[] = [];
    const { batcher } = setup({}, () => {
      suppressed.push(isTracingSuppressed(context.active()));
      return OK;
    });
    addRecords(batcher, 0, 3);
    await batcher.forceFlush();
    expect(suppressed).toEqual([true]);
  });

  it('survives a codec that throws, a transport that throws and a transport that rejects', async () => {
    const transport = new FakeTransport((_request, index) => {
      if (index === 0) throw new Error('boom');
      if (index === 1) return Promise.reject(new Error('async boom'));
      return OK;
    });
    const codec = countingCodec();
    const original = codec.toUpsertItems;
    codec.toUpsertItems = (item) => {
      if (item.id === record(3).id) throw new Error('mapping bug');
      return original(item);
    };
    codec.estimateBytes = (item) => {
      if (item.id === record(4).id) throw new Error('estimate bug');
      return 100;
    };
    batcher = createBatcher(batcherOptions(transport, codec, { flushIntervalMs: 0 }));
    for (let index = 0; index < 6; index += 1) expect(() => batcher!.add(record(index))).not.toThrow();
    const flushed = batcher.forceFlush();
    await settle(5000);
    await flushed;
    expect(batcher.stats()).toMatchObject({ delivered: 5, dropped: { rejected: 1 } });
  });
});
