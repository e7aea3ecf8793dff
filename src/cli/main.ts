#!/usr/bin/env node
/**
 * `callbridge serve`: the local server from the command line (SPEC §1). Prints exactly one line,
 * `callbridge listening on http://HOST:PORT`, once requests are accepted; SIGINT/SIGTERM close
 * the server (in-flight requests get `CLOSE_GRACE_MS` to finish, the database closes) and exit 0.
 * Bad arguments exit 2.
 */
import { startServer } from '../server/index.js';
import packageJson from '../../package.json' with { type: 'json' };
import { parseCommand, USAGE, UsageError } from './args.js';

const EXIT_USAGE = 2;

async function main(): Promise<void> {
  let command;
  try {
    command = parseCommand(process.argv.slice(2), process.env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`callbridge: ${error.message}\nRun "callbridge --help" for usage.\n`);
    process.exitCode = EXIT_USAGE;
    return;
  }
  if (command.kind === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (command.kind === 'version') {
    process.stdout.write(`${packageJson.version}\n`);
    return;
  }

  const server = await startServer({
    host: command.host,
    port: command.port,
    dbPath: command.dbPath,
    users: command.users,
    completeMode: command.completeMode,
    logger: command.logger,
  }).catch((error: unknown) => {
    throw withPortHint(withDatabasePath(error, command.dbPath), command.port);
  });
  process.stdout.write(`callbridge listening on ${server.url}\n`);

  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    server.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`callbridge: error while closing: ${(error as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

/**
 * SQLite's errors do not say which file ("unable to open database file"): a start-up error from
 * the database names the `--db` path, so the one line printed is enough to act on.
 */
function withDatabasePath(error: unknown, dbPath: string): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  const fromSqlite = typeof code === 'string' && code.startsWith('SQLITE_');
  const message = error instanceof Error ? error.message : '';
  if (!fromSqlite && !/database/i.test(message)) return error;
  return new Error(`${message} (--db ${JSON.stringify(dbPath)})`, { cause: error });
}

/** A port in use (another server, often an earlier `callbridge serve`): the line says what to do. */
function withPortHint(error: unknown, port: number): unknown {
  if ((error as { code?: unknown } | null)?.code !== 'EADDRINUSE') return error;
  const message = error instanceof Error ? error.message : String(error);
  return new Error(`${message}: port ${port} is taken (another server?); stop it, or pass --port N (0 picks a free port)`, { cause: error });
}

main().catch((error: unknown) => {
  // Start-up failures (port in use, unreadable database): one line, not a stack trace.
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`callbridge: ${message}\n`);
  process.exit(1);
});
