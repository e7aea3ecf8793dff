export { createBatcher, COMPLETE_MODE_REQUIRED } from './batcher.js';
export type { Batcher, BatcherOptions, RecordCodec } from './batcher.js';
export { nextDelay, INITIAL_BACKOFF_MS, BACKOFF_FACTOR, MAX_BACKOFF_MS } from './backoff.js';
export { DROP_REASONS, DROP_REPORT_INTERVAL_MS } from './stats.js';
export type { DeliveryStats, DropReason } from './stats.js';
export { truncateLargestStrings } from './truncate.js';
