/**
 * The one place where an HTTP answer or a socket error becomes a `SendOutcome` (STYLE practice 2).
 * The batcher acts on the outcome kind alone; the typed client turns failures into error classes.
 *
 * Decisions the spec leaves open, written down here:
 * - Only the statuses SPEC §4.5 lists are retried (408, 429, 500, 502, 503, 504). Any other 5xx
 *   (501 Not Implemented, 505, 507, ...) is a `reject`: retrying an endpoint the server does not
 *   implement cannot succeed; the batcher drops the batch as `rejected` with one error (it
 *   splits a batch only on 400/422, which can be about some of its items).
 * - A 2xx whose body is not JSON is still `ok` (the server committed the write; re-sending would only
 *   rewrite the same records), with `bodyError` saying why `body` is undefined.
 * - A 1xx/3xx that reaches us (undici does not follow redirects) is a `reject` naming the status
 *   and `Location`, so a misconfigured base URL surfaces instead of looping.
 * - Socket and timeout errors are `retry`. So is an error we do not recognise: losing data on an
 *   unforeseen transient error is worse than retrying until the batcher's deadline. Only errors that
 *   can never succeed on a retry (a closed transport, an invalid request, TLS certificate problems,
 *   an https:// URL on a plain-HTTP port) are a `reject` with status 0.
 */
import { STATUS_CODES } from 'node:http';
import type { FailedOutcome, SendOutcome } from './transport.js';

/** Statuses that may succeed when sent again (SPEC §4.5). */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 429, 500, 502, 503, 504]);

/**
 * Longest wait a `Retry-After` may ask for. Longer values (a misconfigured proxy sending a day)
 * are cut to this; the batcher's own deadline (`maxRetryMs`, 5 min by default) still applies.
 */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

/** `code` of the error the transport aborts a request with when `requestTimeoutMs` passes. */
export const TIMEOUT_CODE = 'CALLBRIDGE_TIMEOUT';
/** `code` of the error for a request cancelled through the caller's `AbortSignal`. */
export const ABORTED_CODE = 'CALLBRIDGE_ABORTED';

/** Socket/DNS/undici error codes of failures that a later attempt may not meet. */
const TRANSIENT_ERROR_CODES: ReadonlySet<string> = new Set([
  TIMEOUT_CODE,
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
]);

/** Errors no retry can fix: the request itself, the transport's state, or the TLS setup. */
const PERMANENT_ERROR_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_INVALID_ARG',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
  'ERR_INVALID_ARG_TYPE',
  'ERR_INVALID_URL',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'UNABLE_TO_GET_ISSUER_CERT',
  'INVALID_CA',
  'HOSTNAME_MISMATCH',
  // A TLS hello answered by a plain-HTTP server (an https:// base URL on an http port).
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);

/**
 * Whether no retry can fix an error with this code: those listed, every certificate check
 * OpenSSL names `CERT_…` (not yet valid, revoked, untrusted…: a clock or a certificate to fix),
 * and the TLS handshake failures that come from the configuration (TLS_CONFIGURATION_FAILURE).
 * Other TLS errors (a damaged record, a middlebox's odd alert) stay retried.
 */
function isPermanentError(code: string): boolean {
  return PERMANENT_ERROR_CODES.has(code) || code.startsWith('CERT_') || TLS_CONFIGURATION_FAILURE.test(code);
}

/**
 * TLS alerts and errors that repeat until a certificate, a CA or a protocol setting changes: a
 * server that requires a client certificate answers with a handshake failure
 * (`ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE` under Node 20's OpenSSL,
 * `ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE` under Node 24's), no protocol version or cipher both
 * sides take, a certificate refused.
 */
const TLS_CONFIGURATION_FAILURE =
  /^ERR_SSL_(?:.*_ALERT_(?:HANDSHAKE_FAILURE|PROTOCOL_VERSION|UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_UNKNOWN|UNSUPPORTED_CERTIFICATE|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|ACCESS_DENIED|INSUFFICIENT_SECURITY|UNRECOGNIZED_NAME)|NO_PROTOCOLS_AVAILABLE|UNSUPPORTED_PROTOCOL|NO_SHARED_CIPHER|NO_CIPHERS_AVAILABLE)$/;

/** What to check, for errors whose own text does not say. */
const HINTS: Readonly<Record<string, string>> = {
  ERR_SSL_WRONG_VERSION_NUMBER: 'the server did not answer in TLS: if it serves plain HTTP, use http:// in baseUrl',
};

/** A response as the transport read it: status, headers, and the body text (error bodies capped). */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/** A request that produced no usable answer. `status` is set when headers came but the body broke. */
export interface TransportFailure {
  readonly error: unknown;
  readonly status?: number;
}

/** Who asked and where: auth outcomes name both (never the password). */
export interface ClassifyContext {
  /** `baseUrl + path` of the request. */
  readonly url: string;
  readonly username: string;
  /** The proxy requests go through (password masked), named in the reasons of socket errors. */
  readonly proxy?: string;
  /** Clock for HTTP-date `Retry-After` values; `Date.now()` when absent. */
  readonly now?: number;
}

/**
 * Classify one request's result.
 *
 * @example
 * classify({ status: 503, headers: { 'retry-after': '2' }, body: '' }, { url, username: 'dev' });
 * // -> { kind: 'retry', status: 503, afterMs: 2000, reason: '503 Service Unavailable' }
 */
export function classify(result: TransportFailure, context: ClassifyContext): FailedOutcome;
export function classify(result: HttpAnswer | TransportFailure, context: ClassifyContext): SendOutcome;
export function classify(result: HttpAnswer | TransportFailure, context: ClassifyContext): SendOutcome {
  return 'error' in result ? classifyError(result, context) : classifyAnswer(result, context);
}

function classifyAnswer(answer: HttpAnswer, context: ClassifyContext): SendOutcome {
  const { status } = answer;
  if (status >= 200 && status < 300) return okOutcome(answer);

  const said = readServerWords(answer.body);
  // Forwarded through a proxy (an http:// service), an answer the service's words are missing
  // from may be the proxy's own (a 502 when it cannot reach the service, a 403 from its rules).
  const forwarded = context.proxy !== undefined && context.url.startsWith('http:');
  const reason = said.reason ?? (forwarded ? `${fallbackReason(answer)} (answered through the proxy ${context.proxy})` : fallbackReason(answer));
  if (status === 413) return { kind: 'split', status: 413, reason };
  if (status === 401 || status === 403) {
    return { kind: 'auth', status, reason: authReason(status, reason, context) };
  }
  if (RETRYABLE_STATUSES.has(status)) {
    const afterMs = parseRetryAfter(header(answer.headers, 'retry-after'), context.now ?? Date.now());
    return { kind: 'retry', status, reason, ...(afterMs === undefined ? {} : { afterMs }) };
  }
  return {
    kind: 'reject',
    status,
    reason,
    ...(said.errorCode === undefined ? {} : { errorCode: said.errorCode }),
    ...(said.detail === undefined ? {} : { detail: said.detail }),
  };
}

function okOutcome(answer: HttpAnswer): SendOutcome {
  if (answer.body.trim() === '') return { kind: 'ok', status: answer.status, body: undefined };
  try {
    return { kind: 'ok', status: answer.status, body: JSON.parse(answer.body) as unknown };
  } catch (error) {
    return {
      kind: 'ok',
      status: answer.status,
      body: undefined,
      bodyError: `response is not JSON (${(error as Error).message}): ${excerpt(answer.body)}`,
    };
  }
}

function classifyError(failure: TransportFailure, context: ClassifyContext): FailedOutcome {
  const code = errorCode(failure.error);
  const refusal = context.proxy === undefined ? undefined : proxyRefusal(failure.error, context.proxy);
  if (refusal !== undefined) return refusal;
  const described = describeError(failure.error, code, context.url);
  const reason = context.proxy === undefined ? described : `${described} (through the proxy ${context.proxy})`;
  const status = failure.status === undefined ? {} : { status: failure.status };
  if (code !== undefined && isPermanentError(code)) {
    return { kind: 'reject', status: failure.status ?? 0, reason, code, cause: failure.error };
  }
  const cutDuringUpload = failure.status === undefined && isWriteReset(failure.error, code);
  // A request the caller cancelled: its cause is the caller's reason (what `abort(reason)` was
  // given, or AbortSignal.timeout()'s TimeoutError), not our wrapper.
  const cause = code === ABORTED_CODE && failure.error instanceof Error && failure.error.cause !== undefined ? failure.error.cause : failure.error;
  return {
    kind: 'retry',
    ...status,
    reason,
    ...(code === undefined ? {} : { code }),
    cause,
    ...(cutDuringUpload ? { cutDuringUpload } : {}),
  };
}

/**
 * undici's errors when a proxy refuses: a tunnel request (`CONNECT`) answered with another status
 * than 200, or a forwarded request answered 407.
 */
const PROXY_REFUSALS = [/^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling$/, /^Proxy Authentication Required \((407)\)$/];
/** `code` of the outcome when the proxy refuses to pass requests on (407, 403, or a failed tunnel). */
export const PROXY_REFUSED_CODE = 'CALLBRIDGE_PROXY_REFUSED';

/**
 * A proxy's refusal to pass a request on, in words: 407 (credentials missing or wrong) and 403
 * (destination not allowed) are rejects, as no retry changes them; any other status (502, 503
 * from a proxy that cannot reach the service) is retried.
 */
function proxyRefusal(error: unknown, proxy: string): FailedOutcome | undefined {
  const message = error instanceof Error ? error.message : '';
  const status = PROXY_REFUSALS.map((pattern) => pattern.exec(message)?.[1]).find((found) => found !== undefined);
  if (status === undefined) return undefined;
  const statusCode = Number(status);
  const reason = `the proxy ${proxy} refused the request to the service: ${statusCode} ${STATUS_CODES[statusCode] ?? ''}`.trimEnd();
  if (statusCode === 407 || statusCode === 403) return { kind: 'reject', status: 0, reason, code: PROXY_REFUSED_CODE, cause: error };
  return { kind: 'retry', reason, code: PROXY_REFUSED_CODE, cause: error };
}

/** A reset met while writing the request: EPIPE, or ECONNRESET from the `write` syscall. */
function isWriteReset(error: unknown, code: string | undefined): boolean {
  if (code === 'EPIPE') return true;
  return code === 'ECONNRESET' && failedSyscall(error) === 'write';
}

/** The `syscall` of the socket error, under undici's wrappers like {@link errorCode} reads `code`. */
function failedSyscall(error: unknown, depth = 0): string | undefined {
  if (error === null || typeof error !== 'object' || depth > 3) return undefined;
  const { syscall, cause } = error as { syscall?: unknown; cause?: unknown };
  return typeof syscall === 'string' ? syscall : failedSyscall(cause, depth + 1);
}

/** The fields the service puts in an error body (SPEC §2.5), when the body is that JSON. */
function readServerWords(body: string): { reason?: string; errorCode?: string; detail?: unknown } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return {};
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
  const record = parsed as Record<string, unknown>;
  const words: { reason?: string; errorCode?: string; detail?: unknown } = {};
  if (typeof record.reason === 'string') words.reason = record.reason;
  if (typeof record.error_code === 'string') words.errorCode = record.error_code;
  if (typeof record.detail === 'string') {
    // FastAPI's own errors (unknown route, wrong method) carry their message as a string `detail`.
    words.reason ??= record.detail;
  } else if (record.detail !== undefined) {
    words.detail = record.detail;
    words.reason ??= describeValidationDetail(record.detail);
  }
  return words;
}

/** A 422 has no `reason`: say what its first issue says, with where. */
function describeValidationDetail(detail: unknown): string | undefined {
  if (!Array.isArray(detail) || detail.length === 0) return undefined;
  const first = detail[0] as { msg?: unknown; loc?: unknown } | null;
  if (first === null || typeof first !== 'object' || typeof first.msg !== 'string') return undefined;
  const where = Array.isArray(first.loc) ? ` at ${first.loc.join('.')}` : '';
  const more = detail.length > 1 ? ` (and ${detail.length - 1} more)` : '';
  return `${first.msg}${where}${more}`;
}

function fallbackReason(answer: HttpAnswer): string {
  const text = answer.body.trim();
  const location = header(answer.headers, 'location');
  const statusText = STATUS_CODES[answer.status];
  let reason = statusText === undefined ? `HTTP ${answer.status}` : `${answer.status} ${statusText}`;
  if (location !== undefined && answer.status >= 300 && answer.status < 400) reason += ` to ${location}`;
  return text === '' ? reason : `${reason}: ${excerpt(text)}`;
}

function authReason(status: 401 | 403, serverReason: string, context: ClassifyContext): string {
  const who =
    context.username === ''
      ? 'without credentials (set username/password or apiKey, or CALLBRIDGE_USERNAME/CALLBRIDGE_PASSWORD or CALLBRIDGE_API_KEY)'
      : `as user "${context.username}"`;
  const what = status === 401 ? 'rejected the credentials' : 'denied access to this project';
  return `${context.url} ${what} (${status}) ${who}: ${serverReason}`;
}

/**
 * Milliseconds to wait from a `Retry-After` value: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
 * Garbage gives undefined (the caller's backoff applies); a date in the past gives 0; anything over
 * `MAX_RETRY_AFTER_MS` is cut to it.
 */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(text)) {
    ms = Number(text) * 1000;
  } else if (HTTP_DATE.test(text)) {
    // Every HTTP-date is GMT; the asctime form does not say so, and Date.parse would read it
    // in the machine's own zone.
    const at = Date.parse(text.endsWith(' GMT') ? text : `${text} GMT`);
    if (!Number.isFinite(at)) return undefined;
    ms = at - now;
  } else {
    return undefined;
  }
  return Math.min(Math.max(0, Math.ceil(ms)), MAX_RETRY_AFTER_MS);
}

/**
 * The three HTTP-date forms: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850
 * (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). Checked before
 * `Date.parse`, which also accepts text like `"1 2"` or `"tomorrow 3"` as dates.
 */
const HTTP_DATE =
  /^(?:[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT|[A-Za-z]{6,9}, \d{2}-[A-Za-z]{3}-\d{2} \d{2}:\d{2}:\d{2} GMT|[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})$/;

function header(headers: HttpAnswer['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The error's code, looking through wrappers (undici's `cause`, happy-eyeballs' AggregateError). */
const WRAPPER_CODES: ReadonlySet<string> = new Set(['UND_ERR', 'UND_ERR_ABORTED', 'UND_ERR_PRX_TLS']);

function errorCode(error: unknown, depth = 0): string | undefined {
  if (error === null || typeof error !== 'object' || depth > 3) return undefined;
  const { code, cause, errors } = error as { code?: unknown; cause?: unknown; errors?: unknown };
  // undici's generic wrappers say less than the socket or TLS error they carry (`UND_ERR_PRX_TLS`:
  // the proxy's certificate, refused for the same reasons as a service's).
  if (typeof code === 'string' && !WRAPPER_CODES.has(code)) return code;
  return errorCode(cause, depth + 1) ?? (Array.isArray(errors) ? errorCode(errors[0], depth + 1) : undefined) ??
    (typeof code === 'string' ? code : undefined);
}

function describeError(error: unknown, code: string | undefined, url: string): string {
  if (code === TIMEOUT_CODE) return `no complete response from ${url} in time (${TIMEOUT_CODE})`;
  const message = error instanceof Error ? error.message : String(error);
  const text = message === '' && error instanceof AggregateError ? 'connection failed' : message;
  const described = code === undefined || text.includes(code) ? text : `${code}: ${text}`;
  const hint = code === undefined || !Object.hasOwn(HINTS, code) ? undefined : HINTS[code];
  return hint === undefined ? described : `${described} (${hint})`;
}

function excerpt(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
