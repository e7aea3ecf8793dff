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

// Symbol.for: one symbol for every copy of this module in the process.
const INVALID_OPTION_BRAND = Symbol.for('callbridge.InvalidOptionError');

/**
 * A misconfigured option, raised at construction (never later, on the send path).
 * A `TypeError` like p-queue's: the message names the option, the expected range and the value.
 */
export class InvalidOptionError extends TypeError {
  /**
   * `instanceof` by a brand rather than by prototype: the `callbridge/server` bundle and the
   * CommonJS build each carry their own copy of this class, and an error thrown by one copy
   * (`startServer({ port: -1 })`) must still be an `InvalidOptionError` to code that imported
   * another (`import { InvalidOptionError } from 'callbridge'`).
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as { [INVALID_OPTION_BRAND]?: unknown })[INVALID_OPTION_BRAND] === true;
  }

  readonly code = 'CALLBRIDGE_INVALID_OPTION';
  readonly option: string;

  /** `Expected \`option\` to be <expected>, got <received>`. */
  constructor(option: string, expected: string, received: unknown);
  /** A message of its own, for a key that is no option at all (see {@link rejectUnknownOptions}). */
  constructor(option: string, message: { readonly message: string });
  constructor(option: string, expected: string | { readonly message: string }, received?: unknown) {
    super(typeof expected === 'string' ? `Expected \`${option}\` to be ${expected}, got ${describe(received)}` : expected.message);
    this.name = 'InvalidOptionError';
    this.option = option;
    Object.defineProperty(this, INVALID_OPTION_BRAND, { value: true });
  }
}

/**
 * Refuse the keys of `options` that are not in `known`: a misspelt option (`baseURL`) would
 * otherwise be ignored without a word, and its default used. The message names the known option
 * the key most likely meant, compared without case, `_`, `-` and `.` and then by edit distance.
 * `elsewhere` maps options of another entry point to where they belong (`spanProcessor` to
 * `register()`), so that one given to the wrong call is told so. Own enumerable string keys only;
 * a known key whose value is `undefined` is fine (unset). It lives here rather than in options.ts
 * so that the server can use it without loading the client's modules.
 *
 * @example
 * rejectUnknownOptions({ baseURL: 'http://x' }, ['baseUrl', 'projectId']);
 * // InvalidOptionError: Unknown option `baseURL` (did you mean `baseUrl`?)
 */
export function rejectUnknownOptions(
  options: object,
  known: readonly string[],
  elsewhere: Readonly<Record<string, string>> = {},
): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const where = Object.hasOwn(elsewhere, key) ? elsewhere[key] : undefined;
    if (where !== undefined) {
      throw new InvalidOptionError(key, { message: `Unknown option \`${key}\` here: it is an option of ${where}` });
    }
    const meant = likeliestKey(key, [...known, ...Object.keys(elsewhere)]);
    const hint =
      meant === undefined
        ? ` (the options are ${known.map((name) => `\`${name}\``).join(', ')})`
        : ` (did you mean \`${meant}\`?${Object.hasOwn(elsewhere, meant) ? ` It is an option of ${elsewhere[meant]}.` : ''})`;
    throw new InvalidOptionError(key, { message: `Unknown option \`${key}\`${hint}` });
  }
}

/**
 * The candidate `key` most likely stands for: equal but for case and separators, else the one
 * candidate it is the start of, else one or two typos away.
 */
function likeliestKey(key: string, candidates: readonly string[]): string | undefined {
  const wanted = comparable(key);
  const same = candidates.find((candidate) => comparable(candidate) === wanted);
  if (same !== undefined) return same;
  // A shortened name (`db` for `dbPath`, `timeout` for `timeoutMs`), when it starts one candidate only.
  const extended = wanted.length >= 2 ? candidates.filter((candidate) => comparable(candidate).startsWith(wanted)) : [];
  if (extended.length === 1) return extended[0];
  // Short keys get one typo only: two would make almost anything "mean" `host` or `port`.
  const allowed = wanted.length <= 5 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = allowed + 1;
  for (const candidate of candidates) {
    const distance = editDistance(wanted, comparable(candidate));
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function comparable(key: string): string {
  return key.toLowerCase().replace(/[-_.\s]/g, '');
}

/** Levenshtein distance (insertions, deletions, substitutions), for keys of a few dozen characters. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
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

/**
 * A received value as an error message shows it, whatever its type: text quoted (and cut),
 * numbers, booleans, null and undefined as themselves, a bigint as `5n`, a symbol as `Symbol(x)`,
 * other values by type and tag (`object [object Array]`). Never throws.
 */
export function describe(value: unknown): string {
  if (value instanceof ReceivedDescription) return value.text;
  if (typeof value === 'string') {
    if (value.length <= MAX_DESCRIBED_CHARS) return JSON.stringify(value);
    return `${JSON.stringify(value.slice(0, MAX_DESCRIBED_CHARS))}... (${value.length} characters)`;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  if (typeof value === 'bigint') return `${value}n`;
  // String() of a symbol is its description (`Symbol(id)`); a template literal would throw.
  if (typeof value === 'symbol') return String(value);
  // The tag may come from a getter of the caller's (`Symbol.toStringTag`), which may throw.
  try {
    return `${typeof value} ${Object.prototype.toString.call(value)}`;
  } catch {
    return typeof value;
  }
}
