/**
 * Accounting invariants of the batcher under mixed failures (fake transport, fake timers).
 * Every record ends delivered XOR dropped, counters match what the transport acknowledged, bytes
 * return to 0, and `retried` counts requests actually sent again.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { diag } from '@opentelemetry/api';
import { createBatcher, type Batcher } from '../../src/batcher/index.js';
import type { SendOutcome } from '../../src/client/transport.js';
import type { DeliveryOptions } from '../../src/options.js';
import { FakeTransport, OK, batcherOptions, countingCodec, record, type Script, type TestRecord } from './fake-transport.js';

const FAKED = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] as const;
beforeEach(() => {
  vi.useFakeTimers({ toFake: [...FAKED] });
});
afterEach(() => {
  diag.disable();
  vi.useRealTimers();
});

const UNAVAILABLE: SendOutcome = { kind: 'retry', status: 503, reason: 'HTTP 503' };

async function turn(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
async function settle(ms = 0): Promise<void> {
  await turn();
  await vi.advanceTimersByTimeAsync(ms);
  await turn();
}

function setup(delivery: DeliveryOptions, script: Script) {
  const transport = new FakeTransport(script);
  const batcher: Batcher<TestRecord> = createBatcher(batcherOptions(transport, countingCodec(), delivery));
  return { transport, batcher };
}

function totalDropped(batcher: Batcher<TestRecord>): number {
  return Object.values(batcher.stats().dropped).reduce((a, b) => a + b, 0);
}

/** A small deterministic PRNG. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('accounting under mixed outcomes', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`seed ${seed}: each record settles once; delivered = distinct ids acknowledged; bytes back to 0`, async () => {
      const random = prng(seed);
      const acked = new Map<string, number>();
      let completeMode = false;
      const script: Script = (request) => {
        if (request.path.endsWith('/calls/complete')) completeMode = true;
        const roll = random();
        let outcome: SendOutcome;
        if (!completeMode && roll < 0.05) outcome = { kind: 'reject', status: 400, reason: 'complete mode', errorCode: 'CALLS_COMPLETE_MODE_REQUIRED' } as SendOutcome;
        else if (roll < 0.25) outcome = UNAVAILABLE;
        else if (roll < 0.4 && request.ids.length > 0) outcome = { kind: 'split', status: 413, reason: 'Request too large' };
        else if (roll < 0.45 && request.ids.length > 0) outcome = { kind: 'reject', status: 400, reason: 'bad item' } as SendOutcome;
        else outcome = OK;
        if (outcome.kind === 'ok') for (const id of request.ids) acked.set(id, (acked.get(id) ?? 0) + 1);
        return outcome;
      };
      const { batcher } = setup({ maxBatchItems: 20, flushIntervalMs: 50, maxRetryMs: 20_000, concurrency: 3 }, script);
      const total = 200;
      for (let i = 0; i < total; i++) {
        batcher.add(record(i, 'x'.repeat(Math.floor(random() * 2000))));
        if (i % 25 === 0) await settle(10);
      }
      const flushed = batcher.forceFlush();
      for (let i = 0; i < 200; i++) await settle(1000);
      await flushed;
      const stats = batcher.stats();
      expect(stats.queued + stats.inFlight).toBe(0);
      expect(stats.queuedBytes).toBe(0);
      expect(stats.delivered + totalDropped(batcher)).toBe(total);
      expect(stats.delivered).toBe(acked.size);
    });
  }
});

describe('retried', () => {
  it('counts only requests sent again: a backoff cut short by shutdown sends nothing', async () => {
    const { transport, batcher } = setup({ shutdownTimeoutMs: 2000, flushIntervalMs: 0 }, () => UNAVAILABLE);
    batcher.add(record(1));
    const done = batcher.shutdown();
    await settle(2000);
    await done;
    expect(batcher.stats().dropped.shutdown).toBe(1);
    // One batch: every request after the first is a retry.
    expect(batcher.stats().retried).toBe(transport.posted.length - 1);
  });

  it('counts only requests sent again: giving up at the deadline sends nothing more', async () => {
    const { transport, batcher } = setup({ maxRetryMs: 3000, flushIntervalMs: 0 }, () => UNAVAILABLE);
    batcher.add(record(1));
    const flushed = batcher.forceFlush();
    await settle(10_000);
    await flushed;
    expect(batcher.stats().dropped.retries_exhausted).toBe(1);
    expect(batcher.stats().retried).toBe(transport.posted.length - 1);
  });
});
