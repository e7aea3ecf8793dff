/**
 * What the delivery worker takes from the application's Node set-up. By default a worker inherits
 * the process's flags (`execArgv`) and environment, `NODE_OPTIONS` included; ours takes them all
 * except the flags below, each of which takes a value:
 *
 * - `--input-type`: for code given as text (`node --input-type=module -e ...`, stdin). A worker
 *   started from a file, as ours is, refuses to start under it.
 * - Preloads (`--import`, `--require`/`-r`, `--loader`/`--experimental-loader`): the worker needs
 *   none of the application's modules, and an instrumentation preload (`node --import
 *   ./tracing.mjs app.js`, the OpenTelemetry docs' set-up) would set tracing up again inside it,
 *   `register()` included: its first delivery came ~90 ms later here (240-285 ms against
 *   142-190 ms after the first span, 3 runs each).
 *
 * `execArgv` and `env` are only given when one of these is present: a worker given `execArgv`
 * refuses flags it would have inherited silently (`--max-old-space-size`, V8's), and is then
 * started with none (see `WorkerDelivery`); those apply to the whole process anyway.
 */

/** The start options a worker takes from the application. */
export interface InheritedStartOptions {
  readonly execArgv?: string[];
  readonly env?: NodeJS.ProcessEnv;
}

const NOT_INHERITED: ReadonlySet<string> = new Set(['--input-type', '--import', '--require', '-r', '--loader', '--experimental-loader']);

export function inheritedStartOptions(execArgv: readonly string[], env: NodeJS.ProcessEnv): InheritedStartOptions {
  const options: { execArgv?: string[]; env?: NodeJS.ProcessEnv } = {};
  const keptFlags = withoutUninherited(execArgv);
  if (keptFlags.length !== execArgv.length) options.execArgv = keptFlags;
  const nodeOptions = env.NODE_OPTIONS;
  if (nodeOptions !== undefined) {
    const given = splitNodeOptions(nodeOptions);
    const kept = withoutUninherited(given);
    if (kept.length !== given.length) options.env = { ...env, NODE_OPTIONS: kept.map(quoteNodeOption).join(' ') };
  }
  return options;
}

/** `args` without the flags of `NOT_INHERITED` and their values (`--flag value` or `--flag=value`). */
function withoutUninherited(args: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const equals = arg.indexOf('=');
    if (NOT_INHERITED.has(arg)) i++; // its value is the next argument
    else if (equals < 0 || !NOT_INHERITED.has(arg.slice(0, equals))) kept.push(arg);
  }
  return kept;
}

/**
 * `NODE_OPTIONS` split as Node splits it: on spaces, except inside double quotes, where a
 * backslash escapes the next character (`--require "./my dir/x.js"`).
 */
export function splitNodeOptions(text: string): string[] {
  const tokens: string[] = [];
  let token: string | undefined;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (quoted) {
      if (char === '"') quoted = false;
      else token += char === '\\' && i + 1 < text.length ? text[++i]! : char;
    } else if (char === '"') {
      quoted = true;
      token ??= '';
    } else if (/\s/.test(char)) {
      if (token !== undefined) tokens.push(token);
      token = undefined;
    } else {
      token = (token ?? '') + char;
    }
  }
  if (token !== undefined) tokens.push(token);
  return tokens;
}

/** A token written back into `NODE_OPTIONS` so that `splitNodeOptions` reads it the same. */
function quoteNodeOption(token: string): string {
  return token === '' || /[\s"\\]/.test(token) ? `"${token.replace(/["\\]/g, (char) => `\\${char}`)}"` : token;
}
