/**
 * Running the built package the way a user does: `node` child processes started in the
 * repository root, so `callbridge` resolves to this package by its name (self-reference through
 * package.json "exports") and loads `dist/`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');

/** What a finished child process left behind. */
export interface NodeRun {
  /** Exit code; null when it was killed (see `timedOut`). */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** True when it had not exited by itself within the time allowed, and was killed. */
  readonly timedOut: boolean;
}

/**
 * Build `dist/` when it is missing (`npm test` builds first; this is for running one file alone).
 * Never rebuilds an existing build: other test files may be reading it.
 */
export function ensureBuilt(): void {
  const outputs = ['dist/index.js', 'dist/index.cjs', 'dist/server/index.js', 'dist/cli/main.js', 'dist/export-worker.js', 'dist/export-worker.cjs'];
  if (outputs.every((file) => existsSync(join(ROOT, file)))) return;
  const build = spawnSync(process.execPath, ['scripts/build.mjs', '--silent'], { cwd: ROOT, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`dist/ is missing and "node scripts/build.mjs" failed; run "npm run build":\n${build.stderr}`);
}

/**
 * The environment of the test process without callbridge's own variables, so a developer's
 * CALLBRIDGE_BASE_URL or WANDB_API_KEY cannot redirect a test; `extra` is added on top.
 */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(CALLBRIDGE_|WF_TRACE_SERVER_URL$|WANDB_API_KEY$)/.test(key)) env[key] = value;
  }
  return { ...env, ...extra };
}

/**
 * Run `node <args>` in the repository root and wait for it to exit by itself. A child still
 * running after `timeoutMs` is killed and reported with `timedOut` (a process that does not exit
 * on its own has left something running).
 */
export function runNode(args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<NodeRun> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: options.env ?? cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, options.timeoutMs ?? 20_000);
  return new Promise((done, fail) => {
    child.on('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    // 'close', not 'exit': both output pipes are drained by then.
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr, timedOut });
    });
  });
}
