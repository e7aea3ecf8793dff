/**
 * The Node flags the delivery worker starts with: the application's, less those that are not for
 * it. A worker inherits the process's flags and `NODE_OPTIONS` by default, which is what we want
 * except for two kinds:
 *
 * - Preloads (`--require`/`-r`, `--import`, `--loader`/`--experimental-loader`): an APM agent, an
 *   OpenTelemetry auto-instrumentation that starts an SDK of its own, a TypeScript loader. Each
 *   would run again in the worker: a second agent or SDK in the process (exporting from inside
 *   our worker), and a slower start. The worker is one self-contained file (tsup.config.ts) that
 *   needs none of them, not even a module resolver such as Yarn PnP's.
 * - `--input-type`: for code given as text (`node --input-type=module -e ...`, stdin); a worker
 *   started from a file refuses to start under it.
 *
 * Only when one of these is present are `execArgv` and `env` given at all: a worker given them
 * explicitly refuses flags it would have inherited silently, the whole process's own
 * (`--max-old-space-size`, V8's, `--use-openssl-ca`, `--title`). Those apply to the worker anyway,
 * being process-wide, so `startWorker` leaves out the ones Node names and tries again.
 */
import type { Worker } from 'node:worker_threads';

/** The start options a worker takes from the application (see {@link inheritedStartOptions}). */
export interface InheritedStartOptions {
  readonly execArgv?: string[];
  readonly env?: NodeJS.ProcessEnv;
}

const PRELOAD_FLAGS = ['--require', '-r', '--import', '--loader', '--experimental-loader'];
const LEFT_OUT_FLAGS: ReadonlySet<string> = new Set(['--input-type', ...PRELOAD_FLAGS]);
const REFUSED_FLAGS_MESSAGE = /invalid execArgv flags: (.+)$/;

/**
 * What the worker takes from the application's `execArgv` and `env`: `{}` (Node's defaults) unless
 * a left-out flag is in either. Then `NODE_OPTIONS` moves into `execArgv`, ahead of the command
 * line's flags as Node reads them: a flag the worker refuses there is named in the error, several
 * at a time (in `NODE_OPTIONS` Node names only the first), so `startWorker` can leave them out.
 */
export function inheritedStartOptions(execArgv: readonly string[], env: NodeJS.ProcessEnv): InheritedStartOptions {
  // An unterminated quote reads as no flags: Node refused to start with it, so it is not reached.
  const fromEnv = env.NODE_OPTIONS === undefined ? [] : (splitNodeOptions(env.NODE_OPTIONS) ?? []);
  const keptArgs = withoutLeftOutFlags(execArgv);
  const keptFromEnv = withoutLeftOutFlags(fromEnv);
  if (keptArgs.length === execArgv.length && keptFromEnv.length === fromEnv.length) return {};
  if (env.NODE_OPTIONS === undefined) return { execArgv: keptArgs };
  const withoutNodeOptions = { ...env };
  delete withoutNodeOptions.NODE_OPTIONS;
  return { execArgv: [...keptFromEnv, ...keptArgs], env: withoutNodeOptions };
}

/**
 * `start(inherited)`, and when the worker refuses flags of the whole process (see the module
 * comment) again without the ones Node names, until it starts or names none that are left; then
 * with no flags at all. Other errors are thrown.
 */
export function startWorker(start: (options: InheritedStartOptions) => Worker, inherited: InheritedStartOptions): Worker {
  let execArgv = inherited.execArgv;
  // Each failed attempt leaves out at least one flag, so this ends.
  for (;;) {
    try {
      return start({ ...inherited, execArgv });
    } catch (error) {
      if (execArgv === undefined || execArgv.length === 0 || !refusesFlags(error)) throw error;
      // Node names some of the refused flags at a time (V8's first, then its own), as given.
      const named = REFUSED_FLAGS_MESSAGE.exec((error as Error).message)?.[1]?.split(', ') ?? [];
      const kept = withoutFlags(execArgv, new Set(named.map(flagName)));
      execArgv = kept.length < execArgv.length ? kept : [];
    }
  }
}

function refusesFlags(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'ERR_WORKER_INVALID_EXEC_ARGV';
}

/** `args` without the left-out flags, in every spelling (`--flag value`, `--flag=value`, `--flag_name`). */
function withoutLeftOutFlags(args: readonly string[]): string[] {
  return withoutFlags(args, LEFT_OUT_FLAGS);
}

/**
 * `args` without the flags named in `names`; a flag written without `=` takes the next argument
 * with it when that is not a flag (`--title x`, `-r ./agent.cjs`).
 */
function withoutFlags(args: readonly string[], names: ReadonlySet<string>): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!names.has(flagName(arg))) kept.push(arg);
    else if (!arg.includes('=') && i + 1 < args.length && !args[i + 1]!.startsWith('-')) i++;
  }
  return kept;
}

/** A flag's name as Node compares names: without its `=value`, `_` read as `-`. */
function flagName(arg: string): string {
  const equals = arg.indexOf('=');
  const name = equals === -1 ? arg : arg.slice(0, equals);
  return name.startsWith('--') ? `--${name.slice(2).replaceAll('_', '-')}` : name;
}

/**
 * `NODE_OPTIONS` split as Node splits it: at spaces outside double quotes; inside them a
 * backslash escapes the next character, and quotes alone make no argument. Undefined for an
 * unterminated quote, which Node refuses itself.
 */
export function splitNodeOptions(text: string): string[] | undefined {
  const tokens: string[] = [];
  let token = '';
  let started = false;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (quoted && char === '\\' && i + 1 < text.length) {
      token += text[++i];
      started = true;
    } else if (char === '"') {
      quoted = !quoted;
    } else if (char === ' ' && !quoted) {
      if (started) tokens.push(token);
      token = '';
      started = false;
    } else {
      token += char;
      started = true;
    }
  }
  if (quoted) return undefined;
  if (started) tokens.push(token);
  return tokens;
}
