/**
 * The typed client's side of the failure model: a failed `SendOutcome` becomes one of the error
 * classes of `src/errors.ts`, so callers branch on `instanceof` or `code` and read the server's
 * `reason`, `errorCode` and `detail` as data.
 */
import {
  AuthError,
  NetworkError,
  NotFoundError,
  RequestRejectedError,
  RequestTooLargeError,
  ServerError,
  TimeoutError,
  type CallbridgeHttpError,
} from '../errors.js';
import { ABORTED_CODE, TIMEOUT_CODE } from './classify.js';
import type { FailedOutcome } from './transport.js';

/**
 * Codes of a request that ran out of time: ours (`requestTimeoutMs` over the whole exchange), and
 * undici's for a pause longer than that while connecting, awaiting the headers or inside the body.
 */
const TIMEOUT_CODES: ReadonlySet<string> = new Set([TIMEOUT_CODE, 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * The error to throw for a failed outcome of a request to `url`.
 *
 * @example
 * const outcome = await transport.post('/obj/read', body);
 * if (outcome.kind !== 'ok') throw errorFromOutcome(outcome, `${baseUrl}/obj/read`);
 */
export function errorFromOutcome(outcome: FailedOutcome, url: string): CallbridgeHttpError {
  switch (outcome.kind) {
    case 'auth':
      return new AuthError({ url, status: outcome.status, reason: outcome.reason });
    case 'split':
      return new RequestTooLargeError({ url, status: 413, reason: outcome.reason });
    case 'reject': {
      const data = {
        url,
        status: outcome.status,
        reason: outcome.reason,
        errorCode: outcome.errorCode,
        detail: outcome.detail,
        retryable: false,
        cause: outcome.cause,
      };
      // Status 0: the request could not be made at all (closed client, TLS setup); a 2xx: its
      // answer broke off for good (the client closed under a stream).
      if (outcome.status === 0 || (outcome.status >= 200 && outcome.status < 300)) {
        return new NetworkError({ ...data, status: outcome.status === 0 ? undefined : outcome.status, errorCode: outcome.code });
      }
      if (outcome.status === 404) return new NotFoundError(data);
      if (outcome.status >= 500) return new ServerError(data);
      return new RequestRejectedError(data);
    }
    case 'retry': {
      // Cancelled through the caller's own signal: sending it again is the caller's call, not advice.
      const retryable = outcome.code !== ABORTED_CODE;
      const data = { url, reason: outcome.reason, retryable, retryAfterMs: outcome.afterMs, cause: outcome.cause };
      const { status } = outcome;
      if (status === undefined || (status >= 200 && status < 300)) {
        // No answer, or an answer whose body broke off: the socket's code is the useful part.
        const network = { ...data, status, errorCode: outcome.code };
        return outcome.code !== undefined && TIMEOUT_CODES.has(outcome.code) ? new TimeoutError(network) : new NetworkError(network);
      }
      return status >= 500 ? new ServerError({ ...data, status }) : new RequestRejectedError({ ...data, status });
    }
  }
}
