import { describe, expect, it } from 'vitest';
import {
  ABORTED_CODE,
  MAX_RETRY_AFTER_MS,
  TIMEOUT_CODE,
  classify,
  parseRetryAfter,
  type HttpAnswer,
} from '../../src/client/classify.js';

const url = 'http://127.0.0.1:6345/call/upsert_batch';
const context = { url, username: 'dev', now: Date.parse('2026-01-02T03:04:05Z') };

function answer(status: number, body: unknown = '', headers: HttpAnswer['headers'] = {}): HttpAnswer {
  return { status, headers, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

function socketError(code: string, message = `socket said ${code}`): Error {
  return Object.assign(new Error(message), { code });
}

describe('classify: 2xx', () => {
  it.each([200, 201, 204, 299])('%i is ok with the parsed JSON body', (status) => {
    expect(classify(answer(status, { res: [{}] }), context)).toEqual({ kind: 'ok', status, body: { res: [{}] } });
  });

  it('an empty body is ok with an undefined body', () => {
    expect(classify(answer(200, ''), context)).toEqual({ kind: 'ok', status: 200, body: undefined });
    expect(classify(answer(204, '  \n'), context)).toEqual({ kind: 'ok', status: 204, body: undefined });
  });

  it('a body that is not JSON is still ok, with bodyError saying why', () => {
    const outcome = classify(answer(200, '<html>proxy page</html>'), context);
    expect(outcome).toMatchObject({ kind: 'ok', status: 200, body: undefined });
    expect(outcome.kind === 'ok' && outcome.bodyError).toContain('<html>proxy page</html>');
  });

  it('JSON scalars and null are bodies too', () => {
    expect(classify(answer(200, 'null'), context)).toEqual({ kind: 'ok', status: 200, body: null });
    expect(classify(answer(200, '42'), context)).toEqual({ kind: 'ok', status: 200, body: 42 });
  });
});

describe('classify: retryable statuses', () => {
  it.each([408, 429, 500, 502, 503, 504])('%i is retry, carrying the status and the server reason', (status) => {
    expect(classify(answer(status, { reason: 'busy' }), context)).toEqual({ kind: 'retry', status, reason: 'busy' });
  });

  it('a retry without a JSON body gets the status text as reason', () => {
    expect(classify(answer(503, ''), context)).toEqual({ kind: 'retry', status: 503, reason: '503 Service Unavailable' });
    expect(classify(answer(502, '<h1>Bad gateway</h1>'), context)).toEqual({
      kind: 'retry',
      status: 502,
      reason: '502 Bad Gateway: <h1>Bad gateway</h1>',
    });
  });

  it('obeys Retry-After in seconds', () => {
    expect(classify(answer(429, '', { 'retry-after': '7' }), context)).toMatchObject({ kind: 'retry', afterMs: 7000 });
    expect(classify(answer(503, '', { 'retry-after': ['2', '9'] }), context)).toMatchObject({ afterMs: 2000 });
  });

  it('obeys Retry-After as an HTTP date, relative to now', () => {
    const at = new Date(context.now + 12_000).toUTCString();
    expect(classify(answer(503, '', { 'retry-after': at }), context)).toMatchObject({ kind: 'retry', afterMs: 12_000 });
  });

  it('ignores a garbage Retry-After', () => {
    const outcome = classify(answer(503, '', { 'retry-after': 'soon' }), context);
    expect(outcome).toEqual({ kind: 'retry', status: 503, reason: '503 Service Unavailable' });
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-02T03:04:05Z');

  it('reads delay-seconds, including zero and decimals', () => {
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 3 ', now)).toBe(3000);
    expect(parseRetryAfter('1.5', now)).toBe(1500);
  });

  it('reads all three HTTP-date forms', () => {
    expect(parseRetryAfter('Fri, 02 Jan 2026 03:04:35 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Friday, 02-Jan-26 03:04:15 GMT', now)).toBe(10_000);
    expect(parseRetryAfter('Fri Jan  2 03:04:25 2026', now)).toBe(20_000);
  });

  it('gives 0 for a date in the past', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:00 GMT', now)).toBe(0);
  });

  it('caps absurd values', () => {
    expect(parseRetryAfter('86400', now)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter('99999999999999999999999', now)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter('Fri, 01 Jan 2100 00:00:00 GMT', now)).toBe(MAX_RETRY_AFTER_MS);
  });

  it.each([undefined, '', 'soon', '-5', '5s', '0x10', '1e3', 'tomorrow 3', '1 2', 'Fri, 99 Foo 2026 99:99:99 GMT', 'NaN', 'Infinity'])(
    'ignores %j',
    (value) => {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    },
  );
});

describe('classify: 413 and auth', () => {
  it('413 is split with the server reason', () => {
    expect(classify(answer(413, { reason: 'Request too large' }), context)).toEqual({
      kind: 'split',
      status: 413,
      reason: 'Request too large',
    });
  });

  it('413 with a cut-off or empty body is still split', () => {
    expect(classify(answer(413, '{"reas'), context)).toMatchObject({ kind: 'split', status: 413 });
    expect(classify(answer(413, ''), context)).toMatchObject({ kind: 'split', status: 413 });
  });

  it.each([401, 403] as const)('%i is auth, naming the URL and the user but never the password', (status) => {
    const outcome = classify(answer(status, { reason: status === 401 ? 'Unauthorized' : 'Forbidden' }), context);
    expect(outcome.kind).toBe('auth');
    expect(outcome.status).toBe(status);
    expect(outcome.kind === 'auth' && outcome.reason).toContain(url);
    expect(outcome.kind === 'auth' && outcome.reason).toContain('"dev"');
    expect(JSON.stringify(outcome)).not.toContain('pw');
  });

  it('auth without any username says no credentials were configured', () => {
    const outcome = classify(answer(401, { reason: 'Unauthorized' }), { url, username: '' });
    expect(outcome.kind === 'auth' && outcome.reason).toMatch(/without credentials.*CALLBRIDGE_API_KEY/);
  });
});

describe('classify: rejects', () => {
  it.each([400, 404, 405, 409, 410, 415, 418, 451])('%i is reject with the server reason', (status) => {
    expect(classify(answer(status, { reason: 'nope' }), context)).toEqual({ kind: 'reject', status, reason: 'nope' });
  });

  it('keeps error_code (complete mode switch-over, SPEC §4.9)', () => {
    const body = { reason: 'This project is in calls-complete mode', error_code: 'CALLS_COMPLETE_MODE_REQUIRED' };
    expect(classify(answer(400, body), context)).toEqual({
      kind: 'reject',
      status: 400,
      reason: body.reason,
      errorCode: 'CALLS_COMPLETE_MODE_REQUIRED',
    });
  });

  it('a 422 keeps its detail list and describes its first issue', () => {
    const detail = [
      { type: 'missing', loc: ['body', 'batch', 0, 'req'], msg: 'Field required', input: {} },
      { type: 'extra_forbidden', loc: ['body', 'x'], msg: 'Extra inputs are not permitted', input: 1 },
    ];
    expect(classify(answer(422, { detail }), context)).toEqual({
      kind: 'reject',
      status: 422,
      reason: 'Field required at body.batch.0.req (and 1 more)',
      detail,
    });
  });

  it('a string detail (the framework’s own errors) becomes the reason', () => {
    expect(classify(answer(404, { detail: 'Not Found' }), context)).toEqual({ kind: 'reject', status: 404, reason: 'Not Found' });
  });

  it('hostile bodies do not break it: arrays, nulls, wrong types, huge text', () => {
    expect(classify(answer(400, [1, 2]), context)).toMatchObject({ kind: 'reject', status: 400 });
    expect(classify(answer(400, 'null'), context)).toMatchObject({ kind: 'reject', reason: '400 Bad Request: null' });
    expect(classify(answer(400, { reason: 5, error_code: {}, detail: [null] }), context)).toEqual({
      kind: 'reject',
      status: 400,
      reason: '400 Bad Request: {"reason":5,"error_code":{},"detail":[null]}',
      detail: [null],
    });
    const outcome = classify(answer(400, 'x'.repeat(100_000)), context);
    expect(outcome.kind === 'reject' && outcome.reason.length).toBeLessThan(400);
  });

  it.each([501, 505, 507, 511, 599])('%i (a 5xx outside the retry list) is reject', (status) => {
    expect(classify(answer(status, { reason: 'no' }), context)).toEqual({ kind: 'reject', status, reason: 'no' });
  });

  it('a redirect is reject naming where it points', () => {
    const outcome = classify(answer(301, '', { location: 'https://elsewhere/' }), context);
    expect(outcome).toEqual({ kind: 'reject', status: 301, reason: '301 Moved Permanently to https://elsewhere/' });
  });
});

describe('classify: errors', () => {
  it.each([
    'ECONNREFUSED',
    'ECONNRESET',
    'EPIPE',
    'ENOTFOUND',
    'EAI_AGAIN',
    'ETIMEDOUT',
    'EHOSTUNREACH',
    'UND_ERR_SOCKET',
    'UND_ERR_CONNECT_TIMEOUT',
    'UND_ERR_HEADERS_TIMEOUT',
    'UND_ERR_BODY_TIMEOUT',
    TIMEOUT_CODE,
    ABORTED_CODE,
  ])('%s is retry with its code and cause', (code) => {
    const error = socketError(code);
    const outcome = classify({ error }, context);
    expect(outcome).toMatchObject({ kind: 'retry', code, cause: error });
    expect(outcome.status).toBeUndefined();
  });

  it('marks a reset met while writing the body as cut during the upload (SPEC §4.6: a lost early 413)', () => {
    const writeReset = Object.assign(socketError('ECONNRESET'), { syscall: 'write' });
    expect(classify({ error: writeReset }, context)).toMatchObject({ kind: 'retry', cutDuringUpload: true });
    const wrapped = Object.assign(new Error('fetch failed'), { cause: writeReset });
    expect(classify({ error: wrapped }, context)).toMatchObject({ kind: 'retry', cutDuringUpload: true });
    expect(classify({ error: socketError('EPIPE') }, context)).toMatchObject({ cutDuringUpload: true });
    // A reset while reading the answer, or after a status arrived, is an ordinary network error.
    const readReset = Object.assign(socketError('ECONNRESET'), { syscall: 'read' });
    expect(classify({ error: readReset }, context)).not.toHaveProperty('cutDuringUpload');
    expect(classify({ error: writeReset, status: 200 }, context)).not.toHaveProperty('cutDuringUpload');
    expect(classify({ error: socketError('ECONNREFUSED') }, context)).not.toHaveProperty('cutDuringUpload');
  });

  it('a timeout names the URL', () => {
    const outcome = classify({ error: socketError(TIMEOUT_CODE) }, context);
    expect(outcome.kind === 'retry' && outcome.reason).toContain(url);
  });

  it('finds the code under undici wrappers and AggregateError', () => {
    const wrapped = Object.assign(new Error('fetch failed'), { cause: socketError('ECONNRESET') });
    expect(classify({ error: wrapped }, context)).toMatchObject({ kind: 'retry', code: 'ECONNRESET' });
    const aggregate = new AggregateError([socketError('ECONNREFUSED'), socketError('ECONNREFUSED')], '');
    const outcome = classify({ error: aggregate }, context);
    expect(outcome).toMatchObject({ kind: 'retry', code: 'ECONNREFUSED' });
    expect(outcome.kind === 'retry' && outcome.reason).toContain('ECONNREFUSED');
  });

  it('keeps the status when the headers came but the body broke', () => {
    expect(classify({ error: socketError('UND_ERR_SOCKET'), status: 200 }, context)).toMatchObject({
      kind: 'retry',
      status: 200,
      code: 'UND_ERR_SOCKET',
    });
  });

  it('an unknown error is retried (losing data on an unforeseen transient error is worse)', () => {
    expect(classify({ error: new Error('something odd') }, context)).toMatchObject({ kind: 'retry', reason: 'something odd' });
    expect(classify({ error: 'a string' }, context)).toMatchObject({ kind: 'retry', reason: 'a string' });
    expect(classify({ error: null }, context)).toMatchObject({ kind: 'retry' });
  });

  it.each([
    'UND_ERR_CLOSED',
    'UND_ERR_DESTROYED',
    'UND_ERR_INVALID_ARG',
    'DEPTH_ZERO_SELF_SIGNED_CERT',
    'CERT_HAS_EXPIRED',
    'CERT_NOT_YET_VALID',
    'CERT_REVOKED',
    'ERR_SSL_WRONG_VERSION_NUMBER',
    'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE',
    'ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE',
    'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
    'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION',
    'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
    'ERR_SSL_NO_PROTOCOLS_AVAILABLE',
  ])(
    '%s (no retry can fix it) is reject with status 0',
    (code) => {
      expect(classify({ error: socketError(code) }, context)).toMatchObject({ kind: 'reject', status: 0, code });
    },
  );

  it.each(['ERR_SSL_DECRYPTION_FAILED_OR_BAD_RECORD_MAC', 'ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR', 'ERR_SSL_SSLV3_ALERT_UNEXPECTED_MESSAGE'])(
    '%s (one connection gone wrong) is retried',
    (code) => {
      expect(classify({ error: socketError(code) }, context)).toMatchObject({ kind: 'retry' });
    },
  );
});
