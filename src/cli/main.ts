#!/usr/bin/env node
/**
 * `callbridge serve`: the local server from the command line (SPEC §1). Prints exactly one line,
 * `callbridge listening on http://HOST:PORT`, once requests are accepted; SIGINT/SIGTERM close
 * the server (in-flight requests finish, the database closes) and exit 0. Bad arguments exit 2.
 */
import { startServer } from '../server/index.js';
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

  const server = await startServer({
    host: command.host,
    port: command.port,
    dbPath: command.dbPath,
    users: command.users,
    completeMode: command.completeMode,
    logger: command.logger,
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

main().catch((error: unknown) => {
  // Start-up failures (port in use, unreadable database): one line, not a stack trace.
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`callbridge: ${message}\n`);
  process.exit(1);
});
