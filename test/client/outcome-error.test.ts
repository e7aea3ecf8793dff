import { describe, expect, it } from 'vitest';
import { errorFromOutcome } from '../../src/client/outcome-error.js';
import {
  AuthError,
  CallbridgeError,
  CallbridgeHttpError,
  NetworkError,
  NotFoundError,
  RequestRejectedError,
  RequestTooLargeError,
  ServerError,
  TimeoutError,
} from '../../src/errors.js';

const url = 'http://127.0.0.1:6345/obj/read';

describe('errorFromOutcome', () => {
  it('auth -> AuthError with its status', () => {
    const error = errorFromOutcome({ kind: 'auth', status: 403, reason: 'denied' }, url);
    expect(error).toBeInstanceOf(AuthError);
    expect(error).toBeInstanceOf(CallbridgeHttpError);
    expect(error).toBeInstanceOf(CallbridgeError);
    expect(error).toMatchObject({ code: 'CALLBRIDGE_AUTH', status: 403, reason: 'denied', url, retryable: false, name: 'AuthError' });
  });

  it('split -> RequestTooLargeError (a RequestRejectedError)', () => {
    const error = errorFromOutcome({ kind: 'split', status: 413, reason: 'Request too large' }, url);
    expect(error).toBeInstanceOf(RequestTooLargeError);
    expect(error).toBeInstanceOf(RequestRejectedError);
    expect(error).toMatchObject({ code: 'CALLBRIDGE_REQUEST_TOO_LARGE', status: 413 });
  });

  it('reject 404 -> NotFoundError; other 4xx -> RequestRejectedError with errorCode and detail', () => {
    expect(errorFromOutcome({ kind: 'reject', status: 404, reason: 'Object not found' }, url)).toBeInstanceOf(NotFoundError);
    const error = errorFromOutcome(
      { kind: 'reject', status: 400, reason: 'complete mode', errorCode: 'CALLS_COMPLETE_MODE_REQUIRED', detail: [1] },
      url,
    );
    expect(error.constructor).toBe(RequestRejectedError);
    expect(error).toMatchObject({ code: 'CALLBRIDGE_REQUEST_REJECTED', errorCode: 'CALLS_COMPLETE_MODE_REQUIRED', detail: [1] });
    expect(error.message).toBe(`400 from ${url}: complete mode`);
  });

  it('reject 5xx -> ServerError that is not retryable; reject status 0 -> NetworkError', () => {
    expect(errorFromOutcome({ kind: 'reject', status: 501, reason: 'x' }, url)).toMatchObject({
      constructor: ServerError,
      retryable: false,
    });
    const cause = new Error('closed');
    const closed = errorFromOutcome({ kind: 'reject', status: 0, reason: 'closed', code: 'UND_ERR_CLOSED', cause }, url);
    expect(closed).toBeInstanceOf(NetworkError);
    expect(closed).toMatchObject({ status: undefined, errorCode: 'UND_ERR_CLOSED', retryable: false, cause });
  });

  it('retry with a status -> ServerError (5xx) or RequestRejectedError (408/429), retryable with retryAfterMs', () => {
    expect(errorFromOutcome({ kind: 'retry', status: 503, reason: 'busy', afterMs: 1000 }, url)).toMatchObject({
      constructor: ServerError,
      retryable: true,
      retryAfterMs: 1000,
    });
    expect(errorFromOutcome({ kind: 'retry', status: 429, reason: 'slow', afterMs: 5 }, url)).toMatchObject({
      constructor: RequestRejectedError,
      status: 429,
      retryable: true,
      retryAfterMs: 5,
    });
  });

  it('retry without a status -> NetworkError, or TimeoutError for the timeout', () => {
    const cause = Object.assign(new Error('reset'), { code: 'ECONNRESET' });
    const network = errorFromOutcome({ kind: 'retry', reason: 'reset', code: 'ECONNRESET', cause }, url);
    expect(network.constructor).toBe(NetworkError);
    expect(network).toMatchObject({ code: 'CALLBRIDGE_NETWORK', errorCode: 'ECONNRESET', retryable: true, cause });
    const timeout = errorFromOutcome({ kind: 'retry', reason: 'slow', code: 'CALLBRIDGE_TIMEOUT' }, url);
    expect(timeout).toBeInstanceOf(TimeoutError);
    expect(timeout.code).toBe('CALLBRIDGE_TIMEOUT');
  });
});
