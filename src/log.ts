/**
 * Where callbridge's own messages go: a refused password, a service that cannot be reached,
 * spans dropped (SPEC §4.1, §4.8).
 *
 * Every message goes to the OpenTelemetry `diag` logger, as SPEC §4 asks. But `diag` says nothing
 * until the application registers a logger (`diag.setLogger`), and most do not: a wrong password
 * or a service that is not running would then go unnoticed while every span is dropped. So when no
 * `diag` logger is registered, messages from `logLevel` up are also written to stderr. With a
 * logger registered they go only there, filtered by its own level, so nothing is said twice.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { diag } from '@opentelemetry/api';

/** Levels of `logLevel`, from quietest: `'none'` prints nothing, `'info'` everything. */
export const LOG_LEVELS = ['none', 'error', 'warn', 'info'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export type MessageLevel = Exclude<LogLevel, 'none'>;

/** A sink for one exporter's messages, printing from its `logLevel` up when `diag` has no logger. */
export interface Log {
  error(message: string): void;
  warn(message: string): void;
  info(message: string): void;
}

/**
 * Where `@opentelemetry/api` keeps its globals (one slot per major version, shared by every copy of
 * the package in the process): `{ version, diag?, ... }`; `diag.setLogger` fills `diag`,
 * `diag.disable` empties it. The API has no public way to ask whether a logger is registered.
 */
const OTEL_API_GLOBALS = Symbol.for('opentelemetry.js.api.1');

/**
 * Whether the application (or a worker's forwarding logger) has registered a `diag` logger that
 * callbridge's `diag` calls reach. The API's copy that callbridge imports ignores a slot made by
 * an older minor version (two copies of the package in one app): a logger there never sees our
 * messages, so they are printed. Should the slot ever move, messages are printed as well as logged.
 */
export function hasDiagLogger(): boolean {
  const globals = (globalThis as Record<symbol, { version?: unknown; diag?: unknown } | undefined>)[OTEL_API_GLOBALS];
  if (globals?.diag === undefined) return false;
  const own = ownApiVersion();
  return own === undefined || (typeof globals.version === 'string' && apiAccepts(own, globals.version));
}

/** Read once: undefined until then, null when it could not be read. */
let ownVersion: string | null | undefined;

/**
 * For code that carries its own copy of `@opentelemetry/api` (the delivery worker's bundle), which
 * is the copy that registers `diag` there: the package on disk is another one, whose version says
 * nothing about the slot, so a registered logger is taken as reached.
 */
export function apiIsBundled(): void {
  ownVersion = null;
}

/** The version of the `@opentelemetry/api` callbridge imports; undefined when it cannot be read (a bundle). */
function ownApiVersion(): string | undefined {
  if (ownVersion === undefined) ownVersion = readOwnApiVersion() ?? null;
  return ownVersion ?? undefined;
}

function readOwnApiVersion(): string | undefined {
  try {
    let dir = dirname(createRequire(import.meta.url).resolve('@opentelemetry/api'));
    for (let depth = 0; depth < 4; depth++, dir = dirname(dir)) {
      const manifest = join(dir, 'package.json');
      if (!existsSync(manifest)) continue;
      const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown; version?: unknown };
      if (name === '@opentelemetry/api' && typeof version === 'string') return version;
    }
  } catch {
    // Not resolvable from here (bundled): assume one copy.
  }
  return undefined;
}

/** The API's own rule (internal/semver.js) for a release: same major, and our minor at most the slot's. */
export function apiAccepts(own: string, slot: string): boolean {
  if (own === slot) return true;
  const ownParts = /^(\d+)\.(\d+)\.\d+$/.exec(own);
  const slotParts = /^(\d+)\.(\d+)\.\d+$/.exec(slot);
  if (ownParts === null || slotParts === null) return false;
  return ownParts[1] === slotParts[1] && Number(ownParts[2]) <= Number(slotParts[2]);
}

/** Longest message printed: a server's reason is its own text, of any length. */
export const MAX_PRINTED_CHARS = 2000;

/**
 * Characters that could make a printed message more than one line or drive the terminal: C0 and C1
 * controls (ANSI escape sequences start with ESC), line and paragraph separators, and the bidi
 * overrides that reorder what is shown. A server's reason is quoted in messages verbatim.
 */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `message` as it is printed: cut at `MAX_PRINTED_CHARS`, with unprintable characters as `\uXXXX`. */
export function printable(message: string): string {
  const over = message.length - MAX_PRINTED_CHARS;
  const cut = over > 0 ? `${message.slice(0, MAX_PRINTED_CHARS)}…[${over} more characters]` : message;
  return cut.replace(UNPRINTABLE, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The `Log` of one exporter: to `diag` always; printed from `level` up while `diag` has no logger. */
export function createLog(level: LogLevel): Log {
  const printsFrom = LOG_LEVELS.indexOf(level);
  const say = (messageLevel: MessageLevel, message: string): void => {
    try {
      diag[messageLevel](message);
    } catch {
      // The application's logger threw: its problem must not become the application's exception.
    }
    if (printsFrom < LOG_LEVELS.indexOf(messageLevel) || hasDiagLogger()) return;
    try {
      // stderr, never stdout: stdout is the application's output (a CLI's, a pipe's).
      // '%s': the message is data, never a format string.
      if (messageLevel === 'error') console.error('%s', printable(message));
      else console.warn('%s', printable(message));
    } catch {
      // A replaced console that throws must not turn a report into the application's exception.
    }
  };
  return {
    error: (message) => say('error', message),
    warn: (message) => say('warn', message),
    info: (message) => say('info', message),
  };
}
