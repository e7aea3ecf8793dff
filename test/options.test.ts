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
  type ConnectionOptions,
  type ExporterOptions,
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

  it('takes an API key without the whitespace around it, and refuses an empty apiKey option', () => {
    expect(resolveConnection({}, { WANDB_API_KEY: 'wb-key\n' })).toMatchObject({ username: 'api', password: 'wb-key' });
    expect(resolveConnection({}, { CALLBRIDGE_API_KEY: ' cb-key\r\n' })).toMatchObject({ username: 'api', password: 'cb-key' });
    expect(resolveConnection({ apiKey: 'from-file\n' }, {})).toMatchObject({ username: 'api', password: 'from-file' });
    for (const apiKey of ['', '  \n']) {
      expect(() => resolveConnection({ apiKey }, { WANDB_API_KEY: 'wb' })).toThrow(/`apiKey` to be a non-empty API key \(leave it out to use CALLBRIDGE_API_KEY or WANDB_API_KEY\)/);
    }
    // Passwords are sent as they are: spaces may be part of one.
    expect(resolveConnection({ username: 'u', password: ' pw ' }, {})).toMatchObject({ password: ' pw ' });
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

describe('resolveConnection: what requests would not carry as given is refused', () => {
  it('takes only text for baseUrl, username, password and apiKey, and a URL object by its href', () => {
    expect(resolveConnection({ baseUrl: new URL('http://opt:2/prefix/') }, {}).baseUrl).toBe('http://opt:2/prefix');
    expect(() => resolveConnection({ baseUrl: 5 as unknown as string }, {})).toThrow(/`baseUrl` to be an http\(s\) URL \(a string or URL\), got 5$/);
    expect(() => resolveConnection({ username: 5 as unknown as string, password: 'pw' }, {})).toThrow(/`username` to be a string, got 5$/);
    expect(() => resolveConnection({ username: 'dev', password: {} as unknown as string }, {})).toThrow(/`password` to be a string, got object/);
    expect(() => resolveConnection({ apiKey: ['k'] as unknown as string }, {})).toThrow(/`apiKey` to be a string/);
  });

  it('refuses credentials in baseUrl, never repeating them, whether from the option or the environment', () => {
    for (const [options, env, from] of [
      [{ baseUrl: 'http://dev:s3cret@host:1/x' }, {}, ''],
      [{}, { CALLBRIDGE_BASE_URL: 'http://dev:s3cret@host:1/x' }, ' (from CALLBRIDGE_BASE_URL)'],
      [{}, { WF_TRACE_SERVER_URL: 'http://dev:s3cret@host:1/x' }, ' (from WF_TRACE_SERVER_URL)'],
    ] as const) {
      const attempt = () => resolveConnection(options, env);
      expect(attempt).toThrow(InvalidOptionError);
      expect(attempt).toThrow(/`baseUrl`.*without credentials \(put credentials in username\/password or apiKey/);
      expect(attempt).toThrow(`got a URL with credentials before the host (http://***@host:1/x)${from}`);
      expect(attempt).not.toThrow(/s3cret|dev/);
    }
    // A URL that does not parse is quoted with whatever precedes its last `@` masked.
    expect(() => resolveConnection({ baseUrl: 'http://dev:s3/cret@ho st' }, {})).toThrow(/got "http:\/\/\*\*\*@ho st"$/);
  });

  it('refuses a query or fragment in baseUrl (requests would drop them), without quoting it', () => {
    expect(() => resolveConnection({ baseUrl: 'http://host:1/x?key=s3cret' }, {})).toThrow(/without a query or fragment.*got a URL with a query \(http:\/\/host:1\/x\?\.\.\.\)$/);
    expect(() => resolveConnection({}, { CALLBRIDGE_BASE_URL: 'http://host:1/#s3cret' })).toThrow(/got a URL with a fragment \(http:\/\/host:1\/#\.\.\.\) \(from CALLBRIDGE_BASE_URL\)$/);
    expect(() => resolveConnection({ baseUrl: 'http://host:1/?' }, {})).toThrow(/a query/);
  });

  it("refuses an explicit baseUrl: '' instead of falling back to the environment or the default", () => {
    expect(() => resolveConnection({ baseUrl: '' }, { CALLBRIDGE_BASE_URL: 'http://env:1' })).toThrow(/`baseUrl`.*leave it out.*got ""$/);
    expect(() => resolveConnection({ baseUrl: '' }, {})).toThrow(InvalidOptionError);
  });

  it('refuses a user name with ":", which Basic auth would send as part of the password', () => {
    expect(() => resolveConnection({ username: 'a:b', password: 'pw' }, {})).toThrow(/`username` to be a user name without ":".*got "a:\.\.\."$/);
    expect(() => resolveConnection({}, { CALLBRIDGE_USERNAME: 'a:s3cret', CALLBRIDGE_PASSWORD: 'pw' })).toThrow(/got "a:\.\.\." \(from CALLBRIDGE_USERNAME\)$/);
    expect(() => resolveConnection({}, { CALLBRIDGE_USERNAME: 'a:s3cret', CALLBRIDGE_PASSWORD: 'pw' })).not.toThrow(/s3cret/);
  });

  it('refuses half a user/password pair, saying what is missing and where it would come from', () => {
    expect(() => resolveConnection({}, { CALLBRIDGE_USERNAME: 'dev' })).toThrow(
      /`password` to be set along with the user name "dev" \(from CALLBRIDGE_USERNAME\): the password option or CALLBRIDGE_PASSWORD.*got none$/,
    );
    expect(() => resolveConnection({ username: 'dev' }, {})).toThrow(/`password` to be set along with the user name "dev":/);
    expect(() => resolveConnection({ password: 'pw' }, {})).toThrow(/`username` to be set along with the password: the username option or CALLBRIDGE_USERNAME/);
    expect(() => resolveConnection({}, { CALLBRIDGE_PASSWORD: 'pw' })).toThrow(/`username` to be set along with the password \(from CALLBRIDGE_PASSWORD\)/);
    // An empty password, or none at all, stays possible when it is said so.
    expect(resolveConnection({ username: 'dev', password: '' }, {})).toMatchObject({ username: 'dev', password: '' });
    expect(resolveConnection({}, { CALLBRIDGE_USERNAME: 'dev', CALLBRIDGE_PASSWORD: '' })).toMatchObject({ username: 'dev', password: '' });
    expect(resolveConnection({ username: '', password: '' }, {})).toMatchObject({ username: '', password: '' });
  });
});

describe('the options objects themselves', () => {
  it('refuses null and other non-objects with an InvalidOptionError, not a TypeError of its own', () => {
    for (const bad of [null, 'http://x', 5]) {
      expect(() => resolveConnection(bad as never, {})).toThrow(/Expected `options` to be an object/);
      expect(() => resolveExporterOptions(bad as never, {})).toThrow(InvalidOptionError);
    }
  });

  it('describes every kind of value it refuses without throwing anything else', () => {
    expect(() => resolveExporterOptions({ projectId: Symbol('p') as unknown as string }, {})).toThrow(/got Symbol\(p\)$/);
    expect(() => resolveDelivery({ concurrency: 5n as unknown as number }, {})).toThrow(/`concurrency` to be a positive integer, got 5n$/);
    expect(() => resolveDelivery({ maxBatchItems: null as unknown as number }, {})).toThrow(/got null$/);
    const throwingTag = { get [Symbol.toStringTag](): string { throw new Error('no'); } };
    expect(() => resolveDelivery({ concurrency: throwingTag as unknown as number }, {})).toThrow(/`concurrency` to be a positive integer, got object$/);
  });

  it('refuses unknown keys, naming the option most likely meant', () => {
    expect(() => resolveExporterOptions({ projectId: 'a/b', baseURL: 'http://x' } as ExporterOptions, {})).toThrow(
      new InvalidOptionError('baseURL', { message: 'Unknown option `baseURL` (did you mean `baseUrl`?)' }),
    );
    expect(() => resolveConnection({ api_key: 'k' } as ConnectionOptions, {})).toThrow(/^Unknown option `api_key` \(did you mean `apiKey`\?\)$/);
    expect(() => resolveExporterOptions({ projectId: 'a/b', usename: 'dev' } as ExporterOptions, {})).toThrow(/did you mean `username`/);
    expect(() => resolveConnection({ colour: 'blue' } as ConnectionOptions, {})).toThrow(/^Unknown option `colour` \(the options are `baseUrl`, `username`,.*`proxy`\)$/);
    try {
      resolveConnection({ baseURL: 'http://x' } as ConnectionOptions, {});
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: 'CALLBRIDGE_INVALID_OPTION', option: 'baseURL' });
    }
  });

  it("says when an option belongs to another entry point: register()'s to the exporter, the exporter's to the client", () => {
    expect(() => resolveExporterOptions({ projectId: 'a/b', spanProcessor: 'batch' } as ExporterOptions, {})).toThrow(/`spanProcessor` here: it is an option of register\(\)$/);
    expect(() => resolveExporterOptions({ projectId: 'a/b', span_processor: 'batch' } as ExporterOptions, {})).toThrow(/did you mean `spanProcessor`\? It is an option of register\(\)/);
    expect(() => resolveConnection({ projectId: 'a/b' } as ConnectionOptions, {})).toThrow(/`projectId` here: .*the client takes `project_id` in each request/);
    expect(() => resolveConnection({ maxBatchItems: 10 } as ConnectionOptions, {})).toThrow(/`maxBatchItems` here: it is an option of register\(\) and new CallbridgeExporter\(\)/);
  });

  it('takes every known key, also with the value undefined (unset)', () => {
    const everyOption: Record<keyof ExporterOptions, undefined> = {
      baseUrl: undefined, username: undefined, password: undefined, apiKey: undefined, requestTimeoutMs: undefined,
      connections: undefined, ca: undefined, proxy: undefined, maxBatchItems: undefined, maxBatchBytes: undefined,
      flushIntervalMs: undefined, maxQueueBytes: undefined, backpressureMs: undefined, concurrency: undefined,
      maxRetryMs: undefined, shutdownTimeoutMs: undefined, logLevel: undefined, projectId: undefined,
      deliveryThread: undefined, flushOnExit: undefined,
    };
    expect(resolveExporterOptions(everyOption, { CALLBRIDGE_PROJECT: 'a/b' })).toMatchObject({ projectId: 'a/b', baseUrl: DEFAULT_BASE_URL });
    const { projectId: _p, maxBatchItems: _m, maxBatchBytes: _b, flushIntervalMs: _f, maxQueueBytes: _q, backpressureMs: _bp,
      concurrency: _c, maxRetryMs: _r, shutdownTimeoutMs: _s, logLevel: _l, deliveryThread: _d, flushOnExit: _e, ...connection } = everyOption;
    expect(resolveConnection(connection, {}).baseUrl).toBe(DEFAULT_BASE_URL);
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
    // OpenTelemetry's more detailed levels read as callbridge's most detailed.
    for (const level of ['debug', 'DEBUG', 'verbose', 'all', ' info\n']) expect(resolveDelivery({}, { CALLBRIDGE_LOG_LEVEL: level }).logLevel).toBe('info');
    expect(() => resolveDelivery({ logLevel: 'debug' as never }, {})).toThrow(InvalidOptionError);
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
    // A span is two items that travel together: a batch of one item could not hold it.
    expect(() => resolveDelivery({ maxBatchItems: 1 })).toThrow(/`maxBatchItems`.*an integer >= 2 \(a span is two items, its start and end, sent together\).*got 1/);
    expect(resolveDelivery({ maxBatchItems: 2 }).maxBatchItems).toBe(2);
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

  it('takes text only: a list or an object whose text is "entity/project" is refused', () => {
    for (const bad of [['a/b'], { toString: () => 'a/b' }, 42]) {
      expect(() => resolveExporterOptions({ projectId: bad as unknown as string }, {})).toThrow(/`projectId` to be an "entity\/project" string/);
    }
  });

  it("says what it received: an explicit '', nothing at all, or the variable's value", () => {
    expect(() => resolveExporterOptions({ projectId: '' }, { CALLBRIDGE_PROJECT: 'acme/env' })).toThrow(/got ""$/);
    expect(() => resolveExporterOptions({}, {})).toThrow(/got none \(neither the option nor CALLBRIDGE_PROJECT is set\)$/);
    expect(() => resolveExporterOptions({}, { CALLBRIDGE_PROJECT: 'acme' })).toThrow(/got "acme" \(from CALLBRIDGE_PROJECT\)$/);
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
