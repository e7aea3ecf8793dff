/**
 * The low-level send path shared by the typed client and the batcher: one undici `Pool` per
 * service, keep-alive, Basic auth computed once. `post` never throws: every HTTP status and socket
 * error is classified in one place (`classify.ts`) into the outcomes below (STYLE practice 2).
 *
 * Timeout: `requestTimeoutMs` bounds the whole exchange, from the request until the response body
 * is read (undici's own `headersTimeout`/`bodyTimeout` only bound the gaps). For a response handed
 * back unread (`exchange` with a streaming reader) the timer stops at the headers and undici's
 * `bodyTimeout` (same value) bounds each pause in the body instead, so a slow consumer of a long
 * stream is not cut off.
 *
 * The early 413 (SPEC §4.6): a server may answer 413 on seeing `Content-Length` and close the
 * socket while we are still writing the body. undici parses an answer that arrives before the
 * socket error; when the body of such an answer is then cut short, we keep the status and what
 * arrived of the body rather than reporting the socket error.
 */
import { Pool, ProxyAgent } from 'undici';
import type { Dispatcher, FormData } from 'undici';
import type { ResolvedConnection } from '../options.js';
import { ABORTED_CODE, TIMEOUT_CODE, classify, type ClassifyContext } from './classify.js';
import { displayedProxy } from './proxy.js';
import { contextTrusting } from './trusted-cas.js';

export type SendOutcome =
  /**
   * 2xx. `body` is the parsed JSON response (or undefined for an empty body). `bodyError` is set
   * when the body was not JSON (the request still succeeded).
   */
  | { readonly kind: 'ok'; readonly status: number; readonly body: unknown; readonly bodyError?: string }
  /**
   * 408, 429, 500, 502, 503, 504, timeouts, network errors. `afterMs` from `Retry-After`; `status`
   * when the server answered; `code` and `cause` for socket errors (`ECONNRESET`, `CALLBRIDGE_TIMEOUT`).
   */
  | {
      readonly kind: 'retry';
      readonly status?: number;
      readonly afterMs?: number;
      readonly reason: string;
      readonly code?: string;
      readonly cause?: unknown;
      /**
       * The peer closed the connection while the request body was being written (`write
       * ECONNRESET`, `EPIPE`) and no answer could be read: what a server that answers 413 early
       * and closes without draining the body looks like when its answer is lost (SPEC §4.6).
       */
      readonly cutDuringUpload?: boolean;
    }
  /** 413, including the early answer a server sends before reading the body. */
  | { readonly kind: 'split'; readonly status: 413; readonly reason: string }
  /**
   * Any other 4xx (and 5xx outside the retry list): the server refused the content. `detail` is a
   * 422's detail list. Status 0 with `code`/`cause`: the request could not be made at all and no
   * retry can fix that (transport closed, invalid request, TLS certificate errors).
   */
  | {
      readonly kind: 'reject';
      readonly status: number;
      readonly reason: string;
      readonly errorCode?: string;
      readonly detail?: unknown;
      readonly code?: string;
      readonly cause?: unknown;
      /**
       * The peer closed the connection while the request body was being written (`write
       * ECONNRESET`, `EPIPE`) and no answer could be read: what a server that answers 413 early
       * and closes without draining the body looks like when its answer is lost (SPEC §4.6).
       */
      readonly cutDuringUpload?: boolean;
    }
  /** 401/403: not retried. `reason` names the URL and the user. */
  | { readonly kind: 'auth'; readonly status: 401 | 403; readonly reason: string };

/** Every outcome but `ok`. */
export type FailedOutcome = Exclude<SendOutcome, { readonly kind: 'ok' }>;

/** Options of `Transport.post`. */
export interface PostOptions {
  readonly signal?: AbortSignal;
  /**
   * Read a 2xx body to its end without parsing it (`ok` then has `body: undefined`). For callers
   * that only need the status: the batcher discards `upsert_batch`'s reply, a list with one entry
   * per item (1000 by default), whose parse was pure waste on the hot path. Errors are unchanged:
   * a 2xx body cut short is still a `retry`, and error bodies are still read for their reason.
   * @default false
   */
  readonly discardBody?: boolean;
}

export interface Transport {
  /** POST a ready JSON body to `baseUrl + path`. Never throws; never rejects. */
  post(path: string, body: string | Uint8Array, options?: PostOptions): Promise<SendOutcome>;
  /** Close the connection pool. Idempotent. */
  close(): Promise<void>;
}

/** The body of a 2xx response as undici hands it over (an async iterable of chunks with readers). */
export type ResponseBody = Dispatcher.ResponseData['body'];

/** One request of any shape, for the endpoints that are not JSON in, JSON out. */
export interface ExchangeRequest {
  /** @default 'POST' */
  readonly method?: 'GET' | 'POST';
  /** Path under the base URL, starting with `/`. */
  readonly path: string;
  /** JSON text/bytes (sent as `application/json`) or a multipart form (undici sets its type). */
  readonly body?: string | Uint8Array | FormData;
  /** Send the Basic auth header. `GET /health` is the one endpoint without. @default true */
  readonly authenticate?: boolean;
  readonly signal?: AbortSignal;
}

/** A 2xx whose body went through the caller's reader. */
export interface Exchanged<T> {
  readonly kind: 'ok';
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly value: T;
}

/** The transport the typed client uses: `Transport` plus requests of any shape. */
export interface HttpTransport extends Transport {
  /** `baseUrl` as resolved, without a trailing slash. */
  readonly baseUrl: string;
  readonly username: string;
  /** Like `post`, for any request shape (GET, multipart, no auth): the 2xx body parsed as JSON. */
  request(request: ExchangeRequest): Promise<SendOutcome>;
  /**
   * Send `request`; on a 2xx, hand the open body to `read2xx` (under the request timeout) and return
   * what it returns. Never rejects: anything else, including `read2xx` throwing, is a failed outcome.
   */
  exchange<T>(request: ExchangeRequest, read2xx: (body: ResponseBody) => Promise<T> | T): Promise<Exchanged<T> | FailedOutcome>;
}

/** Most bytes of an error response we keep: reasons are short, a hostile server's body need not be. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * Open a keep-alive connection pool to `connection.baseUrl`.
 *
 * @example
 * const transport = createTransport(resolveConnection({ baseUrl: server.url, username: 'dev', password: 'pw' }));
 * const outcome = await transport.post('/call/upsert_batch', JSON.stringify({ batch }));
 * if (outcome.kind === 'retry') setTimeout(resend, outcome.afterMs ?? backoff);
 * await transport.close();
 */
export function createTransport(connection: ResolvedConnection): HttpTransport {
  return new PoolTransport(connection);
}

class PoolTransport implements HttpTransport {
  readonly baseUrl: string;
  readonly username: string;
  /** A keep-alive pool to the service, or a proxy agent in front of one. */
  readonly #dispatcher: Dispatcher;
  readonly #origin: string;
  /** The proxy as messages show it (password masked), when there is one. */
  readonly #proxy: string | undefined;
  /** Path of the base URL (`https://host/prefix` -> `/prefix`), put before every request path. */
  readonly #pathPrefix: string;
  readonly #authorization: string | undefined;
  readonly #timeoutMs: number;
  /** Response bodies handed back unread (streams) and not yet closed. */
  readonly #openBodies = new Set<ResponseBody>();
  #closing: Promise<void> | undefined;

  constructor(connection: ResolvedConnection) {
    const base = new URL(connection.baseUrl);
    this.baseUrl = connection.baseUrl.replace(/\/+$/, '');
    this.username = connection.username;
    this.#pathPrefix = base.pathname.replace(/\/+$/, '');
    this.#timeoutMs = connection.requestTimeoutMs;
    // Computed once: base64 of the same credentials on every request is wasted work.
    this.#authorization =
      connection.username === '' && connection.password === ''
        ? undefined
        : `Basic ${Buffer.from(`${connection.username}:${connection.password}`, 'utf8').toString('base64')}`;
    this.#origin = base.origin;
    this.#proxy = connection.proxy === undefined ? undefined : displayedProxy(connection.proxy);
    this.#dispatcher = createDispatcher(base, connection);
  }

  async post(path: string, body: string | Uint8Array, options?: PostOptions): Promise<SendOutcome> {
    const request: ExchangeRequest = options?.signal === undefined ? { path, body } : { path, body, signal: options.signal };
    if (options?.discardBody !== true) return this.request(request);
    const result = await this.exchange(request, drain);
    if (result.kind === 'ok') return { kind: 'ok', status: result.status, body: undefined };
    // A 2xx whose body then broke off or ran out of time: the service commits a write before it
    // answers, and this body was to be discarded. Sending it again would only write the same
    // records, and could end a batch that is stored as retries_exhausted.
    if (result.status !== undefined && result.status >= 200 && result.status < 300) {
      return { kind: 'ok', status: result.status, body: undefined, bodyError: result.reason };
    }
    return result;
  }

  async request(request: ExchangeRequest): Promise<SendOutcome> {
    const result = await this.exchange(request, (responseBody) => responseBody.text());
    if (result.kind !== 'ok') return result;
    return classify({ status: result.status, headers: result.headers, body: result.value }, this.#context(request.path));
  }

  async exchange<T>(
    request: ExchangeRequest,
    read2xx: (body: ResponseBody) => Promise<T> | T,
  ): Promise<Exchanged<T> | FailedOutcome> {
    const context = this.#context(request.path);
    const callerSignal = request.signal;
    if (callerSignal?.aborted) return classify({ error: abortedByCaller(callerSignal) }, context);
    // One controller, aborted with a coded reason by whichever comes first: our timer or the caller.
    // (Not AbortSignal.any: a long-lived caller signal, such as a batcher's shutdown signal, would
    // collect one dependent signal per request.)
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(codedError(TIMEOUT_CODE, 'request timed out')), this.#timeoutMs);
    // The pool's sockets keep the process alive while a request runs; this timer need not.
    timer.unref();
    const detachFromCaller =
      callerSignal === undefined
        ? ignore
        : whenAborted(callerSignal, () => controller.abort(abortedByCaller(callerSignal)));
    let status: number | undefined;
    let body: ResponseBody | undefined;
    try {
      const response = await settledByAbort(
        this.#dispatcher.request({
          origin: this.#origin,
          method: request.method ?? 'POST',
          path: this.#pathPrefix + request.path,
          headers: this.#headers(request),
          body: request.body ?? null,
          signal: controller.signal,
        }),
        controller.signal,
      );
      status = response.statusCode;
      body = response.body;
      if (status < 200 || status >= 300) {
        const text = await readCapped(response.body, MAX_ERROR_BODY_BYTES);
        // Not a 2xx, so never 'ok'.
        return classify({ status, headers: response.headers, body: text }, context) as FailedOutcome;
      }
      const value = await read2xx(response.body);
      // A body handed back unread (a stream) is the caller's to read or leave: see close().
      if ((value as unknown) === response.body) this.#keepTrackOf(response.body);
      return { kind: 'ok', status, headers: response.headers, value };
    } catch (error) {
      body?.destroy();
      const cause: unknown = controller.signal.aborted ? controller.signal.reason : error;
      return classify(status === undefined ? { error: cause } : { error: cause, status }, context);
    } finally {
      clearTimeout(timer);
      // A body handed back unread stays cancellable by the caller until it closes.
      if (body !== undefined && !body.destroyed) body.once('close', detachFromCaller);
      else detachFromCaller();
    }
  }

  /**
   * Closes the pool once the requests under way have ended. Bodies handed back unread (a stream
   * the caller stopped reading without closing it) are destroyed first, and so is one handed back
   * after this call (its request was under way): each holds a connection that would otherwise
   * never come back, and the pool's close would wait for it forever. Requests reading their own
   * answers (everything but streams) end as usual.
   */
  close(): Promise<void> {
    if (this.#closing === undefined) {
      // Coded as undici codes a closed pool, so a stream cut here is not advised to be retried.
      for (const body of this.#openBodies) body.destroy(codedError('UND_ERR_CLOSED', 'the client was closed'));
      this.#closing = this.#dispatcher.close();
    }
    return this.#closing;
  }

  /** Notes a response body handed back unread until it closes (see `close`). */
  #keepTrackOf(body: ResponseBody): void {
    if (body.destroyed) return;
    if (this.#closing !== undefined) {
      body.destroy(codedError('UND_ERR_CLOSED', 'the client was closed'));
      return;
    }
    this.#openBodies.add(body);
    body.once('close', () => this.#openBodies.delete(body));
  }

  #headers(request: ExchangeRequest): Record<string, string> {
    const headers: Record<string, string> = {};
    if (this.#authorization !== undefined && request.authenticate !== false) headers.authorization = this.#authorization;
    if (typeof request.body === 'string' || request.body instanceof Uint8Array) headers['content-type'] = 'application/json';
    return headers;
  }

  #context(path: string): ClassifyContext {
    const context = { url: this.baseUrl + path, username: this.username };
    return this.#proxy === undefined ? context : { ...context, proxy: this.#proxy };
  }
}

/**
 * The pool to the service: a `Pool` to its origin, or through `connection.proxy` a `ProxyAgent`.
 * That tunnels to an `https` service (`CONNECT`), and forwards to an `http` one through an `http`
 * proxy (a proxy commonly refuses tunnels to ports other than 443). A `ca` applies to the
 * service's certificate and to an `https` proxy's (a company proxy is often signed by the company CA).
 *
 * undici makes its own pools for the proxy (the tunnel's `CONNECT`, or the forwarding), with its
 * defaults: 300 s to wait for an answer, any number of sockets. Both factories below give them
 * ours, so that a proxy that never answers fails at `requestTimeoutMs` and lets the transport close.
 */
function createDispatcher(base: URL, connection: ResolvedConnection): Dispatcher {
  const proxy = connection.proxy;
  const secure = connection.ca.length > 0 && (base.protocol === 'https:' || proxy?.startsWith('https:') === true);
  const tls = { timeout: connection.requestTimeoutMs, ...(secure ? { secureContext: contextTrusting(connection.ca) } : {}) };
  const pool = {
    connections: connection.connections,
    headersTimeout: connection.requestTimeoutMs,
    bodyTimeout: connection.requestTimeoutMs,
  };
  if (proxy === undefined) return new Pool(base.origin, { ...pool, connect: tls });
  const ownPool = (origin: string | URL, options: object): Dispatcher => new Pool(origin, { ...options, ...pool });
  return new ProxyAgent({
    ...pool,
    uri: proxy,
    ...userOnlyToken(proxy),
    proxyTunnel: base.protocol === 'https:',
    requestTls: tls,
    proxyTls: tls,
    clientFactory: ownPool,
    factory: ownPool,
  });
}

/**
 * undici sends the credentials of a proxy URL only when it has both a user name and a password;
 * a lone user name (often a token) is sent as curl sends it, `user:`.
 */
function userOnlyToken(proxy: string): { token?: string } {
  const { username, password } = new URL(proxy);
  if (username === '' || password !== '') return {};
  return { token: `Basic ${Buffer.from(`${decodeURIComponent(username)}:`).toString('base64')}` };
}

/**
 * `request`, or the signal's reason once it aborts, whichever comes first. undici acts on an
 * abort only once the request has a connection: one queued behind busy connections (a stream
 * being read slowly holds one) would wait for a free one however long that takes, past its
 * timeout and past the caller's abort. A response that arrives after giving up is discarded.
 */
function settledByAbort(request: Promise<Dispatcher.ResponseData>, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
  if (signal.aborted) {
    void request.then((late) => late.body.destroy(), ignore);
    return Promise.reject(signal.reason as Error);
  }
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      void request.then((late) => late.body.destroy(), ignore);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    request.then(
      (response) => {
        signal.removeEventListener('abort', onAbort);
        resolve(response);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

function ignore(): void {}

/** Per caller signal, what its requests under way do when it aborts (see `whenAborted`). */
const abortCallbacks = new WeakMap<AbortSignal, { readonly callbacks: Set<() => void>; readonly listener: () => void }>();

/**
 * Runs `callback` when `signal` aborts; returns the function that detaches it. One listener per
 * signal however many requests share it, removed once none is under way: a batcher's shutdown
 * signal is shared by every request, and a listener each would trip Node's
 * MaxListenersExceededWarning past ten at once.
 */
function whenAborted(signal: AbortSignal, callback: () => void): () => void {
  let entry = abortCallbacks.get(signal);
  if (entry === undefined) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      abortCallbacks.delete(signal);
      for (const run of callbacks) run();
    };
    entry = { callbacks, listener };
    abortCallbacks.set(signal, entry);
    signal.addEventListener('abort', listener, { once: true });
  }
  const { callbacks, listener } = entry;
  callbacks.add(callback);
  return () => {
    if (!callbacks.delete(callback) || callbacks.size > 0 || abortCallbacks.get(signal)?.listener !== listener) return;
    abortCallbacks.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}

/** Read a body to its end, keeping nothing (the connection then goes back to the pool). */
async function drain(body: ResponseBody): Promise<void> {
  for await (const _chunk of body as AsyncIterable<Buffer>) {
    // Discarded: the caller only needs to know the whole answer arrived.
  }
}

/**
 * Read at most `maxBytes` of an error body. A body cut short by the server closing the socket
 * (the early 413) keeps what arrived: the status already says what happened.
 */
async function readCapped(body: ResponseBody, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      chunks.push(chunk.subarray(0, maxBytes - size));
      size += chunk.length;
      if (size >= maxBytes) break;
    }
  } catch {
    // The socket closed under the body; what we have is what the server managed to say.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The error of a request the caller's signal cancelled, carrying the signal's reason as its cause. */
function abortedByCaller(signal: AbortSignal): Error & { code: string } {
  return codedError(ABORTED_CODE, 'request aborted by the caller', signal.reason);
}

function codedError(code: string, message: string, cause?: unknown): Error & { code: string } {
  return Object.assign(new Error(message, cause === undefined ? undefined : { cause }), { code });
}
