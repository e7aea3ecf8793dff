/**
 * Every option of callbridge, declared once: its type with JSDoc (`@default`, env var), one
 * defaults literal, and the resolvers that apply the order of SPEC §1:
 * explicit option, then environment, then default. Validation happens here, at construction,
 * with a message naming the option and the value received.
 */
import { blockLabels, certificateBlocks, certificateProblem } from './client/pem.js';
import { resolveProxy } from './client/proxy.js';
import { InvalidOptionError, ReceivedDescription } from './errors.js';
import { LOG_LEVELS, type LogLevel } from './log.js';

const MiB = 1024 * 1024;

/** Where the service is and who we are. Used by `createClient`, the exporter and `register`. */
export interface ConnectionOptions {
  /**
   * Base URL of the service, without a trailing path (`http://127.0.0.1:6345`,
   * `https://trace.wandb.ai`).
   * @default env `CALLBRIDGE_BASE_URL`, then `WF_TRACE_SERVER_URL`, then `http://127.0.0.1:6345`
   */
  readonly baseUrl?: string;
  /**
   * Basic-auth user name.
   * @default env `CALLBRIDGE_USERNAME`; `api` when an API key is used
   */
  readonly username?: string;
  /**
   * Basic-auth password.
   * @default env `CALLBRIDGE_PASSWORD`
   */
  readonly password?: string;
  /**
   * API key, sent as the password of user `api` (how the hosted service takes W&B keys).
   * Ignored when `username`/`password` are given.
   * @default env `CALLBRIDGE_API_KEY`, then `WANDB_API_KEY`
   */
  readonly apiKey?: string;
  /**
   * Per-request timeout in milliseconds (headers and body).
   * @default 30000
   */
  readonly requestTimeoutMs?: number;
  /**
   * Most sockets kept open to the service.
   * @default 8
   */
  readonly connections?: number;
  /**
   * Certificates of CAs to trust for an `https` service, in addition to what Node trusts (its
   * roots, `NODE_EXTRA_CA_CERTS`, the system store under `--use-openssl-ca`): a company CA, or the
   * CA that signed a service's own certificate. PEM text (one or more `-----BEGIN CERTIFICATE-----`
   * or `TRUSTED CERTIFICATE` blocks) as a string or bytes, or a list of them.
   * @default none
   */
  readonly ca?: string | Uint8Array | ReadonlyArray<string | Uint8Array>;
  /**
   * HTTP proxy for requests to the service (`http://host:port`, `http://user:password@host:port`,
   * or `https://`); `false` for none whatever the environment says. An `https` service is reached
   * through a tunnel (`CONNECT`), an `http` one by forwarding (through an `http` proxy).
   * @default env `https_proxy`/`HTTPS_PROXY` (for an `https` service), else `http_proxy`/`HTTP_PROXY`,
   * unless `no_proxy`/`NO_PROXY` lists the host; never for loopback hosts (the local server)
   */
  readonly proxy?: string | false;
}

/** How the batcher groups, bounds and retries deliveries (SPEC §4). */
export interface DeliveryOptions {
  /**
   * Most items (a span is two: start and end) in one `call/upsert_batch` request.
   * @default 1000
   */
  readonly maxBatchItems?: number;
  /**
   * Most bytes of JSON in one request; at most 31 MiB (the service takes 32 MiB).
   * @default 10485760 (10 MiB)
   */
  readonly maxBatchBytes?: number;
  /**
   * A batch is sent this long after its first item even when not full.
   * @default 1000
   */
  readonly flushIntervalMs?: number;
  /**
   * Bound on queued plus in-flight bytes; past it new items are dropped (`queue_full`).
   * @default 67108864 (64 MiB)
   */
  readonly maxQueueBytes?: number;
  /**
   * Back-pressure: when spans are made faster than they are delivered, how long one turn of the
   * application's event loop may give to delivery so that the queue drains instead of
   * overflowing. It applies while more than a quarter of `maxQueueBytes` waits to be sent (or
   * three quarters is held, requests in flight included) and the service is taking batches (not
   * while retrying): main-thread delivery then maps in slices of up to this long instead of
   * 0.25 ms, and worker delivery waits up to this long for the worker to make room. `span.end()`
   * itself never waits. 0: never; spans past `maxQueueBytes` are dropped.
   * @default 5
   */
  readonly backpressureMs?: number;
  /**
   * Most requests in flight at once.
   * @default 4
   */
  readonly concurrency?: number;
  /**
   * A batch that keeps failing with retryable errors gives up after this long (`retries_exhausted`).
   * @default 300000 (5 min)
   */
  readonly maxRetryMs?: number;
  /**
   * Longest `shutdown()` waits for the final flush before dropping what is left (`shutdown`).
   * @default 30000
   */
  readonly shutdownTimeoutMs?: number;
  /**
   * Which of callbridge's messages (a refused password, an unreachable service, dropped spans) are
   * also printed to stderr when the application has registered no OpenTelemetry `diag` logger:
   * `'error'`, `'warn'` (errors and warnings), `'info'` (also back-pressure and complete-mode
   * notes) or `'none'`. With a `diag` logger registered, messages go only to it, at its level.
   * @default env `CALLBRIDGE_LOG_LEVEL`, else 'warn'
   */
  readonly logLevel?: LogLevel;
}

/** Options of `new CallbridgeExporter(options)`. */
export interface ExporterOptions extends ConnectionOptions, DeliveryOptions {
  /**
   * Project the calls are written to, as `entity/project`.
   * @default env `CALLBRIDGE_PROJECT` (required one way or the other)
   */
  readonly projectId?: string;
  /**
   * Where spans are mapped, serialised and sent. `'worker'`: a worker thread of the exporter's
   * own, so the application's event loop only copies each ended span once (about 1.5 µs) and
   * never waits on JSON or sockets; costs some CPU for the copy and a few MB for the thread.
   * `'main'`: on the application's thread, in 0.25 ms slices (least total CPU). `'auto'`:
   * `'worker'` when the process may use two or more cores (CPUs it may run on, capped by a
   * container's cgroup CPU quota) and the worker script is present (a bundler may leave
   * `export-worker.js` behind), else `'main'`.
   * @default 'auto'
   */
  readonly deliveryThread?: DeliveryThread;
  /**
   * Flush on the process's `beforeExit`, so a script that simply ends loses nothing: the spans
   * this exporter was given are delivered (at most `shutdownTimeoutMs`, then counted as
   * `shutdown`). Spans still in a `BatchSpanProcessor`'s buffer are not the exporter's yet: flush
   * the provider first, or use `register()`, whose exit flush does both.
   * @default true
   */
  readonly flushOnExit?: boolean;
}

/** Which thread delivers spans: see {@link ExporterOptions.deliveryThread}. */
export type DeliveryThread = 'auto' | 'worker' | 'main';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:6345';

/** The defaults of every numeric option, in one literal. */
export const DEFAULTS = {
  requestTimeoutMs: 30_000,
  connections: 8,
  maxBatchItems: 1000,
  maxBatchBytes: 10 * MiB,
  flushIntervalMs: 1000,
  maxQueueBytes: 64 * MiB,
  backpressureMs: 5,
  concurrency: 4,
  maxRetryMs: 5 * 60_000,
  shutdownTimeoutMs: 30_000,
} as const;

/**
 * Longest delay a Node timer takes (about 24.8 days): past it Node fires after 1 ms, with a
 * warning, so a huge timeout would behave as none.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** The most `backpressureMs` may be: a turn of the event loop longer than a second is an outage. */
export const MAX_BACKPRESSURE_MS = 1000;

/** The service's default body limit is 32 MiB; keep one MiB of headroom for the envelope. */
export const MAX_BATCH_BYTES_LIMIT = 31 * MiB;

export interface ResolvedConnection {
  readonly baseUrl: string;
  readonly username: string;
  readonly password: string;
  readonly requestTimeoutMs: number;
  readonly connections: number;
  /** The `ca` option as one PEM certificate per entry, checked; empty when not given. */
  readonly ca: readonly string[];
  /** The proxy's URL (from the option or the environment), or undefined for direct connections. */
  readonly proxy: string | undefined;
}

export type ResolvedDelivery = Required<DeliveryOptions>;

export interface ResolvedExporterOptions extends ResolvedConnection, ResolvedDelivery {
  readonly projectId: string;
  readonly deliveryThread: DeliveryThread;
  readonly flushOnExit: boolean;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Resolve connection options: explicit option, then environment, then default. */
export function resolveConnection(options: ConnectionOptions = {}, env: Env = process.env): ResolvedConnection {
  const baseUrl = firstSet(options.baseUrl, env.CALLBRIDGE_BASE_URL, env.WF_TRACE_SERVER_URL) ?? DEFAULT_BASE_URL;
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new InvalidOptionError('baseUrl', 'an http(s) URL', baseUrl);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new InvalidOptionError('baseUrl', 'an http(s) URL', baseUrl);
  }
  const { username, password } = resolveCredentials(options, env);
  return {
    baseUrl: baseUrl.replace(/\/+$/, ''),
    username,
    password,
    requestTimeoutMs: boundedInteger('requestTimeoutMs', options.requestTimeoutMs, DEFAULTS.requestTimeoutMs, MAX_TIMER_MS, 1),
    connections: positiveInteger('connections', options.connections, DEFAULTS.connections),
    ca: pemCertificates(options.ca),
    proxy: resolveProxy(parsed, options.proxy, env),
  };
}

const CA_EXPECTED = 'PEM certificates (text or bytes with -----BEGIN CERTIFICATE----- blocks, or a list of them)';

/**
 * The `ca` option split into single PEM certificates, each checked (client/pem.ts). A refused
 * value is described, never quoted: it may be key material.
 */
function pemCertificates(option: ConnectionOptions['ca']): string[] {
  if (option === undefined) return [];
  const entries: unknown[] = Array.isArray(option) ? option : [option];
  if (entries.length === 0) throw new InvalidOptionError('ca', CA_EXPECTED, option);
  const certificates: string[] = [];
  for (const entry of entries) {
    if (typeof entry !== 'string' && !(entry instanceof Uint8Array)) throw new InvalidOptionError('ca', CA_EXPECTED, entry);
    const text = typeof entry === 'string' ? entry : Buffer.from(entry.buffer, entry.byteOffset, entry.byteLength).toString('latin1');
    const blocks = certificateBlocks(text);
    if (blocks.length === 0) throw new InvalidOptionError('ca', CA_EXPECTED, new ReceivedDescription(describeNonCertificate(entry, text)));
    for (const [index, block] of blocks.entries()) {
      const problem = certificateProblem(block);
      if (problem !== undefined) {
        throw new InvalidOptionError('ca', CA_EXPECTED, new ReceivedDescription(`certificate ${index + 1} of ${blocks.length} that does not parse (${problem})`));
      }
      certificates.push(block);
    }
  }
  return certificates;
}

/** What a `ca` entry without a certificate holds, in words that repeat nothing secret. */
function describeNonCertificate(entry: string | Uint8Array, text: string): string {
  const labels = blockLabels(text);
  if (labels.length > 0) return `PEM with no certificate (blocks: ${[...new Set(labels)].join(', ')})`;
  if (typeof entry !== 'string') {
    return `${entry.byteLength} bytes with no PEM block (a DER file? convert it: openssl x509 -inform der -in ca.der -out ca.pem)`;
  }
  if (looksLikePath(entry)) return `the file path ${JSON.stringify(entry)} (pass the file's content: readFileSync(path))`;
  return `text of ${entry.length} characters with no PEM block`;
}

function looksLikePath(text: string): boolean {
  return text.length <= 1024 && !/[\r\n]/.test(text) && (/[\\/]/.test(text) || /\.(pem|crt|cer|der)$/i.test(text));
}

function resolveCredentials(options: ConnectionOptions, env: Env): { username: string; password: string } {
  // An explicit option of either kind wins over anything in the environment.
  if (options.username !== undefined || options.password !== undefined) {
    return {
      username: options.username ?? env.CALLBRIDGE_USERNAME ?? '',
      password: options.password ?? env.CALLBRIDGE_PASSWORD ?? '',
    };
  }
  if (options.apiKey !== undefined) return { username: 'api', password: options.apiKey };
  if (env.CALLBRIDGE_USERNAME || env.CALLBRIDGE_PASSWORD) {
    return { username: env.CALLBRIDGE_USERNAME ?? '', password: env.CALLBRIDGE_PASSWORD ?? '' };
  }
  const apiKey = firstSet(env.CALLBRIDGE_API_KEY, env.WANDB_API_KEY);
  if (apiKey !== undefined) return { username: 'api', password: apiKey };
  return { username: '', password: '' };
}

/** Resolve and validate delivery options against `DEFAULTS`. */
export function resolveDelivery(options: DeliveryOptions = {}, env: Env = process.env): ResolvedDelivery {
  const maxBatchBytes = positiveInteger('maxBatchBytes', options.maxBatchBytes, DEFAULTS.maxBatchBytes);
  if (maxBatchBytes > MAX_BATCH_BYTES_LIMIT) {
    throw new InvalidOptionError('maxBatchBytes', `an integer from 1 to ${MAX_BATCH_BYTES_LIMIT}`, maxBatchBytes);
  }
  const maxQueueBytes = positiveInteger('maxQueueBytes', options.maxQueueBytes, DEFAULTS.maxQueueBytes);
  return {
    maxBatchItems: positiveInteger('maxBatchItems', options.maxBatchItems, DEFAULTS.maxBatchItems),
    maxBatchBytes,
    flushIntervalMs: boundedInteger('flushIntervalMs', options.flushIntervalMs, DEFAULTS.flushIntervalMs, MAX_TIMER_MS),
    maxQueueBytes,
    backpressureMs: boundedInteger('backpressureMs', options.backpressureMs, DEFAULTS.backpressureMs, MAX_BACKPRESSURE_MS),
    concurrency: positiveInteger('concurrency', options.concurrency, DEFAULTS.concurrency),
    maxRetryMs: nonNegativeInteger('maxRetryMs', options.maxRetryMs, DEFAULTS.maxRetryMs),
    shutdownTimeoutMs: boundedInteger('shutdownTimeoutMs', options.shutdownTimeoutMs, DEFAULTS.shutdownTimeoutMs, MAX_TIMER_MS),
    logLevel: resolveLogLevel(options.logLevel, env),
  };
}

const PROJECT_ID = /^[^/\s]+\/[^/\s]+$/;

/** Resolve everything the exporter needs; throws `InvalidOptionError` on the first bad option. */
export function resolveExporterOptions(options: ExporterOptions = {}, env: Env = process.env): ResolvedExporterOptions {
  const projectId = firstSet(options.projectId, env.CALLBRIDGE_PROJECT);
  if (projectId === undefined || !PROJECT_ID.test(projectId)) {
    throw new InvalidOptionError('projectId', 'an "entity/project" string (option or CALLBRIDGE_PROJECT)', projectId);
  }
  const deliveryThread = options.deliveryThread ?? 'auto';
  if (deliveryThread !== 'auto' && deliveryThread !== 'worker' && deliveryThread !== 'main') {
    throw new InvalidOptionError('deliveryThread', "'auto', 'worker' or 'main'", deliveryThread);
  }
  const flushOnExit = options.flushOnExit ?? true;
  if (typeof flushOnExit !== 'boolean') throw new InvalidOptionError('flushOnExit', 'a boolean', flushOnExit);
  return { ...resolveConnection(options, env), ...resolveDelivery(options, env), projectId, deliveryThread, flushOnExit };
}

/** `logLevel`: the option, else `CALLBRIDGE_LOG_LEVEL` (any case), else `'warn'`. */
export function resolveLogLevel(option: LogLevel | undefined, env: Env = process.env): LogLevel {
  const fromEnv = env.CALLBRIDGE_LOG_LEVEL;
  const value = option ?? (fromEnv === undefined || fromEnv === '' ? 'warn' : fromEnv.toLowerCase());
  if (!(LOG_LEVELS as readonly unknown[]).includes(value)) {
    const levels = LOG_LEVELS.map((level) => `'${level}'`).join(', ');
    throw new InvalidOptionError('logLevel', `one of ${levels} (option or CALLBRIDGE_LOG_LEVEL)`, option ?? fromEnv);
  }
  return value as LogLevel;
}

function firstSet(...values: Array<string | undefined>): string | undefined {
  return values.find((value) => value !== undefined && value !== '');
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw new InvalidOptionError(name, 'a positive integer', value);
  return value;
}

function nonNegativeInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw new InvalidOptionError(name, 'an integer >= 0', value);
  return value;
}

function boundedInteger(name: string, value: number | undefined, fallback: number, max: number, min = 0): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new InvalidOptionError(name, `an integer from ${min} to ${max}`, value);
  return value;
}
