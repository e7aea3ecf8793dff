/**
 * Node child processes for tests that drive built code (the CLI, writer scripts): output captured
 * as it arrives, every process killed after each test, and the wait for a server's "listening" line.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface NodeProcess {
  readonly child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** stdout and stderr together, in the order the chunks arrived. */
  output(): string;
  exited(): Promise<Exit>;
}

const running: ChildProcessWithoutNullStreams[] = [];

/**
 * `node <args>` with `env` over this process's environment. `CALLBRIDGE_USERS` is cleared so that a
 * developer's own setting cannot change what a served CLI accepts.
 */
export function spawnNode(args: string[], env: Record<string, string> = {}): NodeProcess {
  const child = spawn(process.execPath, args, { env: { ...process.env, CALLBRIDGE_USERS: '', ...env } });
  running.push(child);
  let stdout = '';
  let stderr = '';
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    output += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    output += chunk;
  });
  const exit = new Promise<Exit>((done) => child.on('exit', (code, signal) => done({ code, signal })));
  return { child, stdout: () => stdout, stderr: () => stderr, output: () => output, exited: () => exit };
}

/** SIGKILL every process {@link spawnNode} started that is still running (for `afterEach`). */
export function killSpawned(): void {
  for (const child of running.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/**
 * The server URL that `listening` (a pattern whose first group is the URL) finds in `server`'s
 * stdout, once it appears. Rejects with the exit code and output if the process exits first.
 */
export function listeningUrl(server: NodeProcess, listening: RegExp): Promise<string> {
  return new Promise<string>((done, fail) => {
    server.child.stdout.on('data', () => {
      const match = listening.exec(server.stdout());
      if (match !== null) done(match[1] as string);
    });
    void server.exited().then(({ code, signal }) =>
      fail(new Error(`the process exited (${code ?? signal}) before listening: ${server.output()}`)),
    );
  });
}
