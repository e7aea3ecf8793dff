import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../src/errors.js';
import {
  DEFAULT_BASE_URL,
  DEFAULTS,
  MAX_BATCH_BYTES_LIMIT,
  MAX_BACKPRESSURE_MS,
  MAX_TIMER_MS,
  resolveConnection,
  resolveDelivery,
  resolveExporterOptions,
} from '../src/options.js';

describe('resolveConnection', () => {
  it('uses the defaults with an empty environment', () => {
    expect(resolveConnection({}, {})).toEqual({
      baseUrl: DEFAULT_BASE_URL,
      username: '',
      password: '',
      requestTimeoutMs: DEFAULTS.requestTimeoutMs,
      connections: DEFAULTS.connections,
      ca: [],
    });
  });

  it('prefers the explicit option, then CALLBRIDGE_*, then the hosted-service variables', () => {
    const env = { CALLBRIDGE_BASE_URL: 'http://env:1', WF_TRACE_SERVER_URL: 'https://wf.example' };
    expect(resolveConnection({ baseUrl: 'http://opt:2/' }, env).baseUrl).toBe('http://opt:2');
    expect(resolveConnection({}, env).baseUrl).toBe('http://env:1');
    expect(resolveConnection({}, { WF_TRACE_SERVER_URL: 'https://wf.example' }).baseUrl).toBe('https://wf.example');
  });

  it('treats an empty environment variable as unset', () => {
    expect(resolveConnection({}, { CALLBRIDGE_BASE_URL: '', WF_TRACE_SERVER_URL: 'http://wf:3' }).baseUrl).toBe('http://wf:3');
  });

  it('resolves credentials: user/password, then API keys as user "api"', () => {
    expect(resolveConnection({ username: 'u', password: 'p' }, { WANDB_API_KEY: 'k' })).toMatchObject({ username: 'u', password: 'p' });
    expect(resolveConnection({ apiKey: 'opt-key' }, { CALLBRIDGE_USERNAME: 'u', CALLBRIDGE_PASSWORD: 'p' })).toMatchObject({ username: 'api', password: 'opt-key' });
    expect(resolveConnection({}, { CALLBRIDGE_USERNAME: 'u', CALLBRIDGE_PASSWORD: 'p', WANDB_API_KEY: 'k' })).toMatchObject({ username: 'u', password: 'p' });
    expect(resolveConnection({}, { CALLBRIDGE_API_KEY: 'cb', WANDB_API_KEY: 'wb' })).toMatchObject({ username: 'api', password: 'cb' });
    expect(resolveConnection({}, { WANDB_API_KEY: 'wb' })).toMatchObject({ username: 'api', password: 'wb' });
  });

  it('fills the half of a user/password pair that is not given from the environment', () => {
    const env = { CALLBRIDGE_USERNAME: 'env-user', CALLBRIDGE_PASSWORD: 'env-pw' };
    expect(resolveConnection({ username: 'dev' }, env)).toMatchObject({ username: 'dev', password: 'env-pw' });
    expect(resolveConnection({ password: 'pw' }, env)).toMatchObject({ username: 'env-user', password: 'pw' });
  });

  it('rejects URLs that are not http(s), naming the option and the value', () => {
    expect(() => resolveConnection({ baseUrl: 'ftp://x' }, {})).toThrow(InvalidOptionError);
    expect(() => resolveConnection({ baseUrl: 'not a url' }, {})).toThrow(/`baseUrl`.*"not a url"/);
    expect(() => resolveConnection({}, { CALLBRIDGE_BASE_URL: 'javascript:alert(1)' })).toThrow(/baseUrl/);
  });

  it('rejects non-positive or non-integer timeouts and pool sizes', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => resolveConnection({ requestTimeoutMs: bad }, {})).toThrow(/requestTimeoutMs/);
      expect(() => resolveConnection({ connections: bad }, {})).toThrow(/connections/);
    }
    expect(() => resolveConnection({ requestTimeoutMs: '5' as unknown as number }, {})).toThrow(/got "5"/);
  });

  it("rejects durations past a Node timer's longest delay, which Node would turn into 1 ms", () => {
    expect(resolveConnection({ requestTimeoutMs: MAX_TIMER_MS }, {}).requestTimeoutMs).toBe(MAX_TIMER_MS);
    expect(() => resolveConnection({ requestTimeoutMs: MAX_TIMER_MS + 1 }, {})).toThrow(/`requestTimeoutMs` to be an integer from 1 to 2147483647/);
    expect(resolveDelivery({ shutdownTimeoutMs: 0, flushIntervalMs: 0 }, {})).toMatchObject({ shutdownTimeoutMs: 0, flushIntervalMs: 0 });
    expect(() => resolveDelivery({ shutdownTimeoutMs: 2 ** 31 }, {})).toThrow(/shutdownTimeoutMs/);
    expect(() => resolveDelivery({ flushIntervalMs: Number.MAX_SAFE_INTEGER }, {})).toThrow(/flushIntervalMs/);
  });
});

describe('resolveDelivery', () => {
  it('fills every default', () => {
    expect(resolveDelivery({}, {})).toEqual({
      maxBatchItems: 1000,
      maxBatchBytes: 10 * 1024 * 1024,
      flushIntervalMs: 1000,
      maxQueueBytes: 64 * 1024 * 1024,
      backpressureMs: 5,
      concurrency: 4,
      maxRetryMs: 300_000,
      shutdownTimeoutMs: 30_000,
      logLevel: 'warn',
    });
  });

  it('takes logLevel from the option, then CALLBRIDGE_LOG_LEVEL (any case), and refuses other values', () => {
    expect(resolveDelivery({ logLevel: 'none' }, { CALLBRIDGE_LOG_LEVEL: 'info' }).logLevel).toBe('none');
    expect(resolveDelivery({}, { CALLBRIDGE_LOG_LEVEL: 'ERROR' }).logLevel).toBe('error');
    expect(resolveDelivery({}, { CALLBRIDGE_LOG_LEVEL: '' }).logLevel).toBe('warn');
    expect(() => resolveDelivery({ logLevel: 'debug' as 'info' }, {})).toThrow(/`logLevel`.*'none', 'error', 'warn', 'info'.*got "debug"/);
    expect(() => resolveDelivery({}, { CALLBRIDGE_LOG_LEVEL: 'loud' })).toThrow(/CALLBRIDGE_LOG_LEVEL.*got "loud"/);
    expect(() => resolveExporterOptions({ projectId: 'a/b' }, { CALLBRIDGE_LOG_LEVEL: 'warning' })).toThrow(InvalidOptionError);
  });

  it('keeps batches under the service body limit', () => {
    expect(resolveDelivery({ maxBatchBytes: MAX_BATCH_BYTES_LIMIT }).maxBatchBytes).toBe(MAX_BATCH_BYTES_LIMIT);
    expect(() => resolveDelivery({ maxBatchBytes: MAX_BATCH_BYTES_LIMIT + 1 })).toThrow(/maxBatchBytes.*32505856/);
  });

  it('accepts zero where zero means "no wait" and refuses it where it would stall', () => {
    expect(resolveDelivery({ flushIntervalMs: 0, maxRetryMs: 0 })).toMatchObject({ flushIntervalMs: 0, maxRetryMs: 0 });
    expect(() => resolveDelivery({ concurrency: 0 })).toThrow(/concurrency/);
    expect(() => resolveDelivery({ maxBatchItems: 0 })).toThrow(/maxBatchItems/);
    expect(() => resolveDelivery({ flushIntervalMs: -5 })).toThrow(/flushIntervalMs.*-5/);
  });

  it('takes backpressureMs from 0 (never wait) to MAX_BACKPRESSURE_MS, whole milliseconds only', () => {
    expect(resolveDelivery({ backpressureMs: 0 }).backpressureMs).toBe(0);
    expect(resolveDelivery({ backpressureMs: MAX_BACKPRESSURE_MS }).backpressureMs).toBe(MAX_BACKPRESSURE_MS);
    for (const bad of [-1, 2.5, MAX_BACKPRESSURE_MS + 1, Number.NaN, Number.POSITIVE_INFINITY, '5' as unknown as number]) {
      expect(() => resolveDelivery({ backpressureMs: bad })).toThrow(/backpressureMs.*an integer from 0 to 1000/);
    }
  });
});

describe('resolveExporterOptions', () => {
  it('requires an entity/project from the option or CALLBRIDGE_PROJECT', () => {
    expect(resolveExporterOptions({ projectId: 'acme/demo' }, {}).projectId).toBe('acme/demo');
    expect(resolveExporterOptions({}, { CALLBRIDGE_PROJECT: 'acme/env' }).projectId).toBe('acme/env');
    for (const bad of [undefined, '', 'acme', 'a/b/c', '/demo', 'acme/', 'a cme/demo']) {
      expect(() => resolveExporterOptions({ projectId: bad }, {})).toThrow(InvalidOptionError);
    }
  });

  it('carries the error code and option name for programmatic handling', () => {
    try {
      resolveExporterOptions({ projectId: 'x' }, {});
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      expect(error).toMatchObject({ code: 'CALLBRIDGE_INVALID_OPTION', option: 'projectId' });
    }
  });
});
