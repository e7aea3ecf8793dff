/**
 * Command-line arguments of `callbridge serve` (SPEC §1), parsed into server options. Pure: no
 * I/O, so every rule is unit-testable; `main.ts` does the printing and exiting.
 */
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import type { ServerUser } from '../server/index.js';

export const USAGE = `Usage: callbridge serve [options]

Run the local call-tracing server (SQLite).

Options:
  --host HOST              interface to listen on (default 127.0.0.1)
  --port PORT              TCP port, 0 for a free one (default 6345)
  --db PATH                SQLite file, or :memory: (default callbridge.db)
  --user NAME:PASSWORD[:ENTITY,ENTITY|*]
                           a user; repeat for more. Entities default to * (all)
  --complete-mode          answer v1 call writes with CALLS_COMPLETE_MODE_REQUIRED
  --log                    log requests as JSON lines on stdout
  -h, --help               show this help
  -v, --version            print the version

Environment:
  CALLBRIDGE_USERS="name:password[:entities];name2:password2"   users, added to --user
  CALLBRIDGE_SQLITE_DRIVER=better-sqlite3|node:sqlite              the SQLite driver (default: better-sqlite3 before Node 24)

At least one user is required (there is no built-in default password).
`;

/** What the command line asks for. */
export type Command =
  | { readonly kind: 'help' }
  | { readonly kind: 'version' }
  | {
      readonly kind: 'serve';
      readonly host: string;
      readonly port: number;
      readonly dbPath: string;
      readonly users: readonly ServerUser[];
      readonly completeMode: boolean;
      readonly logger: boolean;
    };

/** A command line that cannot run; `main` prints the message and exits with status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * Parse `argv` (without node and the script) and the environment into a command.
 * Throws `UsageError` naming the bad argument.
 *
 * @example
 * parseCommand(['serve', '--port', '0', '--user', 'dev:pw'], {});
 * // { kind: 'serve', port: 0, host: '127.0.0.1', users: [{ username: 'dev', password: 'pw', entities: ['*'] }], ... }
 */
export function parseCommand(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Command {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        host: { type: 'string' },
        port: { type: 'string' },
        db: { type: 'string' },
        user: { type: 'string', multiple: true },
        'complete-mode': { type: 'boolean' },
        log: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (error) {
    throw new UsageError(usageMessageOf(error as Error & { code?: string }, argv));
  }
  const { values, positionals } = parsed;
  if (values.help === true) return { kind: 'help' };
  if (values.version === true) return { kind: 'version' };
  const [command, ...extra] = positionals;
  if (command === undefined) throw new UsageError('Missing command: expected "serve"');
  if (command !== 'serve') throw new UsageError(`Unknown command ${JSON.stringify(command)}: expected "serve"`);
  if (extra.length > 0) throw new UsageError(`Unexpected argument ${JSON.stringify(extra[0])}`);

  const users = [
    ...(values.user ?? []).map((spec) => parseUser(spec, '--user')),
    ...parseUserList(env.CALLBRIDGE_USERS),
  ];
  // No users means no one could use the server; a built-in password would be a server anyone on
  // the machine can write to without knowing it. So: refuse, and say how to add one.
  if (users.length === 0) {
    throw new UsageError('No users configured: pass --user NAME:PASSWORD (repeatable) or set CALLBRIDGE_USERS');
  }
  const names = new Set<string>();
  for (const user of users) {
    if (names.has(user.username)) throw new UsageError(`User ${JSON.stringify(user.username)} is configured twice`);
    names.add(user.username);
  }

  const host = hostOf(values.host ?? '127.0.0.1');
  if (values.db === '') throw new UsageError('--db must not be empty (a file path, or :memory:)');
  return {
    kind: 'serve',
    host,
    port: parsePort(values.port),
    dbPath: values.db ?? 'callbridge.db',
    users,
    completeMode: values['complete-mode'] === true,
    logger: values.log === true,
  };
}

function parsePort(value: string | undefined): number {
  if (value === undefined) return 6345;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) {
    throw new UsageError(`--port must be an integer from 0 to 65535, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

/** `CALLBRIDGE_USERS`: `;`-separated user specs; empty entries are skipped. */
function parseUserList(value: string | undefined): ServerUser[] {
  if (value === undefined) return [];
  return value
    .split(';')
    .map((spec) => spec.trim())
    .filter((spec) => spec !== '')
    .map((spec) => parseUser(spec, 'CALLBRIDGE_USERS'));
}

/**
 * `NAME:PASSWORD[:ENTITY,ENTITY|*]`. The password is everything between the first colon and the
 * last one when an entity list follows; without entities the user gets every entity (`*`).
 */
export function parseUser(spec: string, source: string): ServerUser {
  const first = spec.indexOf(':');
  if (first <= 0) throw new UsageError(`${source}: expected NAME:PASSWORD[:ENTITIES], got ${JSON.stringify(redact(spec))}`);
  const username = spec.slice(0, first);
  const rest = spec.slice(first + 1);
  const last = rest.lastIndexOf(':');
  const password = last < 0 ? rest : rest.slice(0, last);
  const entityList = last < 0 ? '*' : rest.slice(last + 1);
  if (password === '') throw new UsageError(`${source}: user ${JSON.stringify(username)} has an empty password`);
  const entities = entityList.split(',').map((entity) => entity.trim());
  if (entities.some((entity) => entity === '' || entity.includes('/'))) {
    throw new UsageError(`${source}: user ${JSON.stringify(username)} has an invalid entity list ${JSON.stringify(entityList)}`);
  }
  return { username, password, entities };
}

/**
 * parseArgs' own message, except for an unknown option: its text advises `--` for a positional
 * starting with `-`, which no argument of `serve` is.
 */
function usageMessageOf(error: Error & { code?: string }, argv: readonly string[]): string {
  if (error.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return error.message;
  const unknown = argv.find((arg) => arg.startsWith('-') && error.message.includes(`'${arg.split('=')[0]}'`));
  return `Unknown option ${JSON.stringify(unknown?.split('=')[0] ?? error.message)}`;
}

/** Never echo a password back into a terminal or log. */
function redact(spec: string): string {
  const colon = spec.indexOf(':');
  return colon < 0 ? spec : `${spec.slice(0, colon)}:***`;
}

/** The `--host` value, an IPv6 address also as URLs write it (`[::1]`, for `::1`). */
function hostOf(value: string): string {
  if (value === '') throw new UsageError('--host must not be empty');
  const bracketed = /^\[(.*)\]$/.exec(value);
  if (bracketed === null) return value;
  const address = bracketed[1] as string;
  if (isIP(address) !== 6) throw new UsageError(`--host ${value}: brackets hold an IPv6 address only (e.g. [::1])`);
  return address;
}
