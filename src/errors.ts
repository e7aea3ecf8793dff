/**
 * Every error callbridge raises, in one file. Each class carries a stable `code` so callers can
 * branch on it without parsing messages (the model is undici's `lib/core/errors.js`).
 */

/** Base class of callbridge's own errors. `code` is stable across releases. */
export class CallbridgeError extends Error {
  readonly code: string;

  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * A misconfigured option, raised at construction (never later, on the send path).
 * A `TypeError` like p-queue's: the message names the option, the expected range and the value.
 */
export class InvalidOptionError extends TypeError {
  readonly code = 'CALLBRIDGE_INVALID_OPTION';
  readonly option: string;

  constructor(option: string, expected: string, received: unknown) {
    super(`Expected \`${option}\` to be ${expected}, got ${describe(received)}`);
    this.name = 'InvalidOptionError';
    this.option = option;
  }
}

/** What a failed request to the service carried: the status (when there was one) and the server's words. */
export interface HttpErrorData {
  /** The endpoint called, `baseUrl + path`. */
  readonly url: string;
  /** HTTP status; undefined when no response arrived (network error, timeout). */
  readonly status?: number;
  /** The server's `reason` (or a description of the failure when it gave none). */
  readonly reason: string;
  /**
   * The server's `error_code`, e.g. `CALLS_COMPLETE_MODE_REQUIRED`. On a `NetworkError`, the socket
   * or undici error code instead (`ECONNREFUSED`, `UND_ERR_SOCKET`, `CALLBRIDGE_TIMEOUT`, `CALLBRIDGE_ABORTED`).
   */
  readonly errorCode?: string;
  /** A 422's `detail` list, as the server sent it. */
  readonly detail?: unknown;
  /** Whether the same request may succeed later (408, 429, 500, 502, 503, 504, network errors). */
  readonly retryable?: boolean;
  /** The server's `Retry-After`, in milliseconds, when it sent one. */
  readonly retryAfterMs?: number;
  readonly cause?: unknown;
}

/**
 * Base class of every error the typed client (`createClient`) throws for a failed request.
 * Branch on `code` or `instanceof`; the fields carry what the server said.
 */
export class CallbridgeHttpError extends CallbridgeError {
  readonly url: string;
  readonly status: number | undefined;
  readonly reason: string;
  readonly errorCode: string | undefined;
  readonly detail: unknown;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(message: string, code: string, data: HttpErrorData) {
    super(message, code, data.cause === undefined ? undefined : { cause: data.cause });
    this.url = data.url;
    this.status = data.status;
    this.reason = data.reason;
    this.errorCode = data.errorCode;
    this.detail = data.detail;
    this.retryable = data.retryable ?? false;
    this.retryAfterMs = data.retryAfterMs;
  }
}

/** 401 or 403: missing/wrong credentials, or the project's entity is not granted to the user. */
export class AuthError extends CallbridgeHttpError {
  declare readonly status: 401 | 403;

  constructor(data: HttpErrorData & { readonly status: 401 | 403 }) {
    super(data.reason, 'CALLBRIDGE_AUTH', data);
  }
}

/** A 4xx other than 401/403: the server refused the request as sent (`reason`, `errorCode`, `detail`). */
export class RequestRejectedError extends CallbridgeHttpError {
  declare readonly status: number;

  constructor(data: HttpErrorData & { readonly status: number }, code = 'CALLBRIDGE_REQUEST_REJECTED') {
    super(`${data.status} from ${data.url}: ${data.reason}`, code, data);
  }
}

/** 404: the object, file or route does not exist. (`callRead` answers `{call: null}` instead.) */
export class NotFoundError extends RequestRejectedError {
  constructor(data: HttpErrorData & { readonly status: number }) {
    super(data, 'CALLBRIDGE_NOT_FOUND');
  }
}

/** 413: the body is over the server's limit (including an answer sent before the body was read). */
export class RequestTooLargeError extends RequestRejectedError {
  constructor(data: HttpErrorData & { readonly status: number }) {
    super(data, 'CALLBRIDGE_REQUEST_TOO_LARGE');
  }
}

/** 5xx. `retryable` is true for 500, 502, 503 and 504 (SPEC §4.5). */
export class ServerError extends CallbridgeHttpError {
  declare readonly status: number;

  constructor(data: HttpErrorData & { readonly status: number }) {
    super(`${data.status} from ${data.url}: ${data.reason}`, 'CALLBRIDGE_SERVER_ERROR', data);
  }
}

/** No response: connection refused or reset, socket closed, DNS failure. The socket error is `cause`. */
export class NetworkError extends CallbridgeHttpError {
  constructor(data: HttpErrorData, code = 'CALLBRIDGE_NETWORK') {
    super(`Request to ${data.url} failed: ${data.reason}`, code, data);
  }
}

/** No complete response within `requestTimeoutMs` (headers and body). */
export class TimeoutError extends NetworkError {
  constructor(data: HttpErrorData) {
    super(data, 'CALLBRIDGE_TIMEOUT');
  }
}

/** A 2xx whose body is not what the endpoint returns (not JSON, or not JSON lines). */
export class UnexpectedResponseError extends CallbridgeHttpError {
  constructor(data: HttpErrorData) {
    super(`Unexpected response from ${data.url}: ${data.reason}`, 'CALLBRIDGE_UNEXPECTED_RESPONSE', data);
  }
}

/** Longest part of a received string an error message quotes (a wrong file's whole text helps no one). */
const MAX_DESCRIBED_CHARS = 120;

/**
 * What an option received, told in words instead of quoted: for values an error message must not
 * repeat (key material, a whole file).
 */
export class ReceivedDescription {
  constructor(readonly text: string) {}
}

function describe(value: unknown): string {
  if (value instanceof ReceivedDescription) return value.text;
  if (typeof value === 'string') {
    if (value.length <= MAX_DESCRIBED_CHARS) return JSON.stringify(value);
    return `${JSON.stringify(value.slice(0, MAX_DESCRIBED_CHARS))}... (${value.length} characters)`;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  return `${typeof value} ${Object.prototype.toString.call(value)}`;
}
