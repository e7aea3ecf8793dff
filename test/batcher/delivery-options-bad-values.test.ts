/** Delivery option validation gives a clear InvalidOptionError for bad values. */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/errors.js';
import { resolveDelivery, type DeliveryOptions } from '../../src/options.js';

const NAMES = ['maxBatchItems', 'maxBatchBytes', 'flushIntervalMs', 'maxQueueBytes', 'backpressureMs', 'concurrency', 'maxRetryMs', 'shutdownTimeoutMs'] as const;
const BAD: unknown[] = [-1, NaN, Infinity, -Infinity, 1.5, '5', null, true, 2 ** 53];

describe('delivery options', () => {
  for (const name of NAMES) {
    for (const value of BAD) {
      it(`refuses ${name}: ${String(value)}`, () => {
        expect(() => resolveDelivery({ [name]: value } as unknown as DeliveryOptions)).toThrow(InvalidOptionError);
      });
    }
  }
});
