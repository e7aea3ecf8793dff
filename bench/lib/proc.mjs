/**
 * Child processes of the bench: the sink, the local server, and one fresh process per scenario
 * run (so RSS and CPU belong to one side only). Each prints one JSON line on stdout.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const BENCH_DIR = fileURLToPath(new URL('..', import.meta.url));
const PROFILE_DIR = `${BENCH_DIR}results/profiles`;
let profileSeq = 0;

/**
 * With BENCH_PROFILE=1 every child runs under `--cpu-prof`, its profiles written to
 * bench/results/profiles/<name>-<n>/: one file per thread, `CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile`
 * (thread 0 is the application's; callbridge's delivery worker writes its own). A fixed
 * `--cpu-prof-name` would give every thread the same file, and the last to end would overwrite the
 * others. Summarise one with bench/profile-summary.mjs.
 */
function profileArgs(name) {
  if (!process.env.BENCH_PROFILE) return [];
  profileSeq++;
  return ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}/${name}-${profileSeq}`];
}

/**
 * Start `node <script> ...args` and resolve with the first stdout line parsed as JSON plus a
 * `stop()` that closes the child's stdin (its cue to exit) and waits for it.
 */
export function startDaemon(script, args = [], { env } = {}) {
  const child = spawn(process.execPath, [...profileArgs(script.replace(/\.mjs$/, '')), `${BENCH_DIR}${script}`, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => {
      try {
        const info = JSON.parse(line);
        resolve({
          ...info,
          pid: child.pid,
          async stop() {
            child.stdin.end();
            const timer = setTimeout(() => child.kill('SIGTERM'), 5000);
            await exited;
            clearTimeout(timer);
          },
        });
      } catch (error) {
        reject(new Error(`${script} printed ${line}: ${error.message}`));
      }
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before it was ready`)));
  });
}

/**
 * Run `node child.mjs <scenario> <side> <json options>` in a fresh process and resolve
 * with the JSON result it prints on its last stdout line.
 */
export function runChild(scenario, side, options) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...profileArgs(`${scenario}-${side}`), `${BENCH_DIR}child.mjs`, scenario, side, JSON.stringify(options)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.once('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '';
      if (code !== 0) return reject(new Error(`${scenario}/${side} exited with ${code}: ${last}`));
      try {
        resolve(JSON.parse(last));
      } catch {
        reject(new Error(`${scenario}/${side} printed no result: ${last}`));
      }
    });
  });
}
