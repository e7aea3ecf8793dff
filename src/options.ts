/**
 * Every option of callbridge, declared once: its type with JSDoc (`@default`, env var), one
 * defaults literal, and the resolvers that apply the order of SPEC §1:
 * explicit option, then environment, then default. Validation happens here, at construction,
 * with a message naming the option and the value received.
 */
import { blockLabels, certificateBlocks, certificateProblem } from './client/pem.js';
import { resolveProxy } from './client/proxy.js';
import { InvalidOptionError, ReceivedDescription, rejectUnknownOptions } from './errors.js';
import { LOG_LEVELS, type LogLevel } from './log.js';
import { MAX_TIMER_MS } from './timers.js';

const MiB = 1024 * 1024;

/** Where the service is and who we are. Used by `createClient`, the exporter and `register`. */
export interface ConnectionOptions {
  /**
   * Base URL of the service, without a trailing path (`http://127.0.0.1:6345`,
   * `https://trace.wandb.ai`), as text or a `URL`. No credentials in it (`username`/`password` or
   * `apiKey` carry them), no query and no fragment: requests would not send them.
   * @default env `CALLBRIDGE_BASE_URL`, then `WF_TRACE_SERVER_URL`, then `http://127.0.0.1:6345`
   */
  readonly baseUrl?: string | URL;
  /**
   * Basic-auth user name, without `:` (RFC 7617). A user name needs a password (`''` for an
   * empty one), and a password a user name.
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
   * Most items in one `call/upsert_batch` request: at least 2, since a span is two items (start
   * and end) that always travel together (SPEC §3).
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

export { MAX_TIMER_MS };

/** The most `backpressureMs` may be: a turn of the event loop longer than a second is an outage. */
export const MAX_BACKPRESSURE_MS = 1000;

/** The service's default body limit is 32 MiB; keep one MiB of headroom for the envelope. */
export const MAX_BATCH_BYTES_LIMIT = 31 * MiB;
/** `maxBatchItems`' floor: one span's start and end items, which never travel apart. */
const MIN_BATCH_ITEMS = 2;

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

/** Every key of `T`, listed once; the compiler checks that none is missing or extra. */
function keysOf<T>(keys: { readonly [K in keyof Required<T>]: true }): readonly string[] {
  return Object.keys(keys);
}

const CONNECTION_KEYS = keysOf<ConnectionOptions>({
  baseUrl: true, username: true, password: true, apiKey: true, requestTimeoutMs: true, connections: true, ca: true, proxy: true,
});
const EXPORTER_KEYS = [
  ...CONNECTION_KEYS,
  ...keysOf<DeliveryOptions>({
    maxBatchItems: true, maxBatchBytes: true, flushIntervalMs: true, maxQueueBytes: true, backpressureMs: true,
    concurrency: true, maxRetryMs: true, shutdownTimeoutMs: true, logLevel: true,
  }),
  ...keysOf<Omit<ExporterOptions, keyof ConnectionOptions | keyof DeliveryOptions>>({ projectId: true, deliveryThread: true, flushOnExit: true }),
];
// `register()` takes these itself and hands the rest to the exporter (exporter/register.ts).
const REGISTER_ONLY = { global: 'register()', spanProcessor: 'register()' };
// Given to `createClient()`, the exporter's own options are a mix-up, said as such.
const EXPORTER_ONLY: Record<string, string> = Object.fromEntries(
  EXPORTER_KEYS.filter((key) => !CONNECTION_KEYS.includes(key)).map((key) => [
    key,
    key === 'projectId'
      ? 'register() and new CallbridgeExporter(); the client takes `project_id` in each request'
      : 'register() and new CallbridgeExporter(), not of createClient()',
  ]),
);

/** `options` as an object (`undefined` as none); `null`, text and other values are refused. */
function optionsObject<T extends object>(options: T | undefined): T {
  if (options === undefined) return {} as T;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('options', 'an object', options);
  }
  return options;
}

/**
 * Resolve connection options (`createClient()`'s): explicit option, then environment, then default.
 * Keys that are no connection option are refused.
 */
export function resolveConnection(options?: ConnectionOptions, env: Env = process.env): ResolvedConnection {
  const given = optionsObject(options);
  rejectUnknownOptions(given, CONNECTION_KEYS, EXPORTER_ONLY);
  return connection(given, env);
}

function connection(options: ConnectionOptions, env: Env): ResolvedConnection {
  const { baseUrl, parsed } = resolveBaseUrl(options.baseUrl, env);
  const { username, password } = resolveCredentials(options, env);
  return {
    baseUrl,
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

const BASE_URL_EXPECTED = 'an http(s) URL';

/**
 * `baseUrl`: the option (text, or a `URL` by its `href`), else `CALLBRIDGE_BASE_URL`, else
 * `WF_TRACE_SERVER_URL`, else the default; without its trailing slashes. Refused: an explicit
 * `''` (it would silently mean the environment or the default), and anything requests would not
 * send as given: credentials (they would be dropped on the wire, and printed in every message that
 * names the URL), a query or a fragment. A refused value is quoted without its credentials or
 * query, which may hold secrets, and with the variable it came from.
 */
function resolveBaseUrl(option: unknown, env: Env): { baseUrl: string; parsed: URL } {
  let text: string;
  let source: string | undefined;
  if (option instanceof URL) {
    text = option.href;
  } else if (option !== undefined) {
    if (typeof option !== 'string') throw new InvalidOptionError('baseUrl', `${BASE_URL_EXPECTED} (a string or URL)`, option);
    if (option === '') {
      throw new InvalidOptionError('baseUrl', `${BASE_URL_EXPECTED} (leave it out to use CALLBRIDGE_BASE_URL, WF_TRACE_SERVER_URL or ${DEFAULT_BASE_URL})`, option);
    }
    text = option;
  } else if (env.CALLBRIDGE_BASE_URL) {
    [text, source] = [env.CALLBRIDGE_BASE_URL, 'CALLBRIDGE_BASE_URL'];
  } else if (env.WF_TRACE_SERVER_URL) {
    [text, source] = [env.WF_TRACE_SERVER_URL, 'WF_TRACE_SERVER_URL'];
  } else {
    text = DEFAULT_BASE_URL;
  }
  // What the URL parser ignores (and requests never carry): spaces and controls around the URL,
  // tabs and line breaks inside it, as a variable read from a file or secret often ends with.
  // Kept, they would show in every message that names the URL, and hide a trailing slash from
  // the trim below.
  text = text.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '').replace(/[\t\n\r]/g, '');
  const from = source === undefined ? '' : ` (from ${source})`;
  const refuse = (expected: string, received: string): never => {
    throw new InvalidOptionError('baseUrl', expected, new ReceivedDescription(`${received}${from}`));
  };
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return refuse(BASE_URL_EXPECTED, JSON.stringify(withoutSecrets(text)));
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') refuse(BASE_URL_EXPECTED, JSON.stringify(withoutSecrets(text)));
  if (parsed.username !== '' || parsed.password !== '') {
    refuse(
      `${BASE_URL_EXPECTED} without credentials (put credentials in username/password or apiKey${source === undefined ? '' : ', or their variables'})`,
      `a URL with credentials before the host (${parsed.protocol}//***@${parsed.host}${parsed.pathname})`,
    );
  }
  const query = /[?#]/.exec(text)?.[0];
  if (query !== undefined) {
    refuse(
      `${BASE_URL_EXPECTED} without a query or fragment (requests would not send them)`,
      `a URL with a ${query === '?' ? 'query' : 'fragment'} (${parsed.origin}${parsed.pathname}${query}...)`,
    );
  }
  return { baseUrl: text.replace(/\/+$/, ''), parsed };
}

/**
 * URL text as an error message may show it: what comes before its last `@` (credentials; a
 * password may hold `/`, `?` or `@`) and the query or fragment are masked: they may hold secrets.
 */
function withoutSecrets(text: string): string {
  const masked = text.replace(/^([a-z][a-z\d+.-]*:\/*)?.*@/is, (_match, scheme: string | undefined) => `${scheme ?? ''}***@`).replace(/([?#]).*$/s, '$1...');
  return masked.length <= MAX_QUOTED_URL_CHARS ? masked : `${masked.slice(0, MAX_QUOTED_URL_CHARS)}...`;
}

/** Longest URL text a message quotes (a whole pasted file helps no one). */
const MAX_QUOTED_URL_CHARS = 120;

/**
 * The Basic-auth pair: explicit options (either half; the other half from the environment), else
 * the `apiKey` option (user `api`), else `CALLBRIDGE_USERNAME`/`CALLBRIDGE_PASSWORD`, else an API
 * key from the environment. Refused at construction rather than answered 401 later: a user name
 * with `:` (Basic auth would send `a:b:pw`, read as user `a`), and half a pair (a user name with no
 * password set anywhere, or a password with no user name), each named with where it came from.
 */
function resolveCredentials(options: ConnectionOptions, env: Env): { username: string; password: string } {
  const username = optionalText('username', options.username);
  const password = optionalText('password', options.password);
  const apiKey = apiKeyText(optionalText('apiKey', options.apiKey));
  if (apiKey === '') {
    // Sent, it would be answered 401 far from here; and it would hide a key in the environment.
    throw new InvalidOptionError('apiKey', 'a non-empty API key (leave it out to use CALLBRIDGE_API_KEY or WANDB_API_KEY)', options.apiKey);
  }
  // An explicit option of either kind wins over anything in the environment.
  if (username !== undefined || password !== undefined) {
    return checkedPair(
      username ?? env.CALLBRIDGE_USERNAME,
      username !== undefined ? 'option' : 'CALLBRIDGE_USERNAME',
      password ?? env.CALLBRIDGE_PASSWORD,
      password !== undefined ? 'option' : 'CALLBRIDGE_PASSWORD',
    );
  }
  if (apiKey !== undefined) return { username: 'api', password: apiKey };
  if (env.CALLBRIDGE_USERNAME || env.CALLBRIDGE_PASSWORD) {
    return checkedPair(env.CALLBRIDGE_USERNAME, 'CALLBRIDGE_USERNAME', env.CALLBRIDGE_PASSWORD, 'CALLBRIDGE_PASSWORD');
  }
  const envApiKey = firstSet(apiKeyText(env.CALLBRIDGE_API_KEY), apiKeyText(env.WANDB_API_KEY));
  if (envApiKey !== undefined) return { username: 'api', password: envApiKey };
  return { username: '', password: '' };
}

/** The pair as resolved (`undefined`: set nowhere), checked; `*From` name the option or variable. */
function checkedPair(
  username: string | undefined,
  usernameFrom: string,
  password: string | undefined,
  passwordFrom: string,
): { username: string; password: string } {
  const fromUser = usernameFrom === 'option' ? '' : ` (from ${usernameFrom})`;
  if (username !== undefined && username.includes(':')) {
    // Quoted up to the colon only: what follows may be a password pasted as `user:password`.
    throw new InvalidOptionError(
      'username',
      'a user name without ":" (Basic auth cannot carry one; the server would read the user name as the part before it)',
      new ReceivedDescription(`${JSON.stringify(`${username.slice(0, username.indexOf(':') + 1)}...`)}${fromUser}`),
    );
  }
  if (username !== undefined && username !== '' && password === undefined) {
    throw new InvalidOptionError(
      'password',
      `set along with the user name ${JSON.stringify(username)}${fromUser}: the password option or CALLBRIDGE_PASSWORD ('' for an empty password)`,
      new ReceivedDescription('none'),
    );
  }
  if ((username === undefined || username === '') && password !== undefined && password !== '') {
    throw new InvalidOptionError(
      'username',
      `set along with the password${passwordFrom === 'option' ? '' : ` (from ${passwordFrom})`}: the username option or CALLBRIDGE_USERNAME (for an API key: apiKey, sent as user "api")`,
      new ReceivedDescription(username === undefined ? 'none' : '""'),
    );
  }
  return { username: username ?? '', password: password ?? '' };
}

/**
 * An API key without the whitespace around it: keys hold none, and one read from a file or a
 * secret often ends with a newline, which the service would answer with a 401.
 */
function apiKeyText(key: string | undefined): string | undefined {
  return key?.trim();
}

/** An optional text option: its value, `undefined` when not given; anything but text refused. */
function optionalText(name: string, value: unknown): string | undefined {
  if (value !== undefined && typeof value !== 'string') throw new InvalidOptionError(name, 'a string', value);
  return value;
}

/** Resolve and validate delivery options against `DEFAULTS`. */
export function resolveDelivery(options: DeliveryOptions = {}, env: Env = process.env): ResolvedDelivery {
  const maxBatchBytes = positiveInteger('maxBatchBytes', options.maxBatchBytes, DEFAULTS.maxBatchBytes);
  if (maxBatchBytes > MAX_BATCH_BYTES_LIMIT) {
    throw new InvalidOptionError('maxBatchBytes', `an integer from 1 to ${MAX_BATCH_BYTES_LIMIT}`, maxBatchBytes);
  }
  const maxQueueBytes = positiveInteger('maxQueueBytes', options.maxQueueBytes, DEFAULTS.maxQueueBytes);
  return {
    maxBatchItems: batchItems(options.maxBatchItems),
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

/**
 * `"entity/project"`: two parts without `/` or spaces (the exporter's `projectId`, and the client's
 * `project_id` where it goes into a URL).
 */
export function isProjectId(value: unknown): value is string {
  return typeof value === 'string' && PROJECT_ID.test(value);
}
const PROJECT_ID_EXPECTED = 'an "entity/project" string (option or CALLBRIDGE_PROJECT)';

/**
 * Resolve everything the exporter needs (`new CallbridgeExporter()`'s and, through it,
 * `register()`'s options); throws `InvalidOptionError` on the first bad option or unknown key.
 */
export function resolveExporterOptions(options?: ExporterOptions, env: Env = process.env): ResolvedExporterOptions {
  const given = optionsObject(options);
  rejectUnknownOptions(given, EXPORTER_KEYS, REGISTER_ONLY);
  const projectId = resolveProjectId(given.projectId, env);
  const deliveryThread = given.deliveryThread ?? 'auto';
  if (deliveryThread !== 'auto' && deliveryThread !== 'worker' && deliveryThread !== 'main') {
    throw new InvalidOptionError('deliveryThread', "'auto', 'worker' or 'main'", deliveryThread);
  }
  const flushOnExit = given.flushOnExit ?? true;
  if (typeof flushOnExit !== 'boolean') throw new InvalidOptionError('flushOnExit', 'a boolean', flushOnExit);
  return { ...connection(given, env), ...resolveDelivery(given, env), projectId, deliveryThread, flushOnExit };
}

/** `projectId`: the option (an explicit `''` is refused, not read as unset), else `CALLBRIDGE_PROJECT`. */
function resolveProjectId(option: unknown, env: Env): string {
  if (option !== undefined) {
    // Text only: a RegExp test would read a list ['a/b'] or an object as its text.
    if (!isProjectId(option)) throw new InvalidOptionError('projectId', PROJECT_ID_EXPECTED, option);
    return option;
  }
  const fromEnv = env.CALLBRIDGE_PROJECT;
  if (fromEnv === undefined || fromEnv === '') {
    throw new InvalidOptionError('projectId', PROJECT_ID_EXPECTED, new ReceivedDescription('none (neither the option nor CALLBRIDGE_PROJECT is set)'));
  }
  if (!isProjectId(fromEnv)) {
    throw new InvalidOptionError('projectId', PROJECT_ID_EXPECTED, new ReceivedDescription(`${JSON.stringify(fromEnv)} (from CALLBRIDGE_PROJECT)`));
  }
  return fromEnv;
}

/**
 * OpenTelemetry's more detailed levels (`OTEL_LOG_LEVEL`), which users carry over to
 * `CALLBRIDGE_LOG_LEVEL`: read as `info`, callbridge's most detailed, rather than refused.
 */
const DETAILED_LEVELS: ReadonlySet<string> = new Set(['debug', 'verbose', 'all']);

/**
 * `logLevel`: the option, else `CALLBRIDGE_LOG_LEVEL` (any case; `debug`, `verbose` and `all`
 * read as `info`), else `'warn'`.
 */
export function resolveLogLevel(option: LogLevel | undefined, env: Env = process.env): LogLevel {
  const fromEnv = env.CALLBRIDGE_LOG_LEVEL?.trim().toLowerCase();
  const envLevel = fromEnv === undefined || fromEnv === '' ? 'warn' : DETAILED_LEVELS.has(fromEnv) ? 'info' : fromEnv;
  const value = option ?? envLevel;
  if (!(LOG_LEVELS as readonly unknown[]).includes(value)) {
    const levels = LOG_LEVELS.map((level) => `'${level}'`).join(', ');
    throw new InvalidOptionError('logLevel', `one of ${levels} (option or CALLBRIDGE_LOG_LEVEL)`, option ?? env.CALLBRIDGE_LOG_LEVEL);
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

function batchItems(value: number | undefined): number {
  if (value === undefined) return DEFAULTS.maxBatchItems;
  if (!Number.isSafeInteger(value) || value < MIN_BATCH_ITEMS) {
    throw new InvalidOptionError('maxBatchItems', `an integer >= ${MIN_BATCH_ITEMS} (a span is two items, its start and end, sent together)`, value);
  }
  return value;
}
