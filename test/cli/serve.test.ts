/**
 * `callbridge serve` as a user runs it: the built CLI (`dist/cli/main.js`) in a child process.
 * The tests drive the build, not the sources: run `npm run build` first (`npm test` does). When
 * `dist/cli/main.js` is missing, the first test builds it with tsup rather than skipping.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { killSpawned, listeningUrl, spawnNode, type NodeProcess } from '../helpers/node-process.js';
import { post } from '../helpers/server.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'dist/cli/main.js');
const LISTENING = /^callbridge listening on (http:\/\/127\.0\.0\.1:(\d+))\n$/;

let dir: string;

beforeAll(async () => {
  if (!existsSync(CLI)) {
    const build = spawnSync('npx', ['tsup'], { cwd: ROOT, encoding: 'utf8' });
    if (build.status !== 0 || !existsSync(CLI)) {
      throw new Error(`dist/cli/main.js is missing and "npx tsup" failed; run "npm run build":\n${build.stderr}`);
    }
  }
  dir = await mkdtemp(join(tmpdir(), 'callbridge-cli-'));
}, 120_000);
afterEach(killSpawned);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function run(args: string[], env: Record<string, string> = {}): NodeProcess {
  return spawnNode([CLI, ...args], env);
}

/** Start `serve` and wait for the one line that says it accepts requests. */
async function serve(args: string[], env: Record<string, string> = {}): Promise<NodeProcess & { url: string }> {
  const cli = run(['serve', '--port', '0', ...args], env);
  return { ...cli, url: await listeningUrl(cli, LISTENING) };
}

const dev = { username: 'dev', password: 'pw' };
const startItem = (id: string) => ({
  mode: 'start',
  req: { start: { project_id: 'acme/cli', id, op_name: 'op', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: { id } } },
});

describe('callbridge serve', () => {
  it('prints exactly one line with the real port, serves, and exits 0 on SIGTERM', async () => {
    const cli = await serve(['--db', join(dir, 'a.db'), '--user', 'dev:pw']);
    expect(cli.stdout()).toMatch(LISTENING);
    expect(Number(LISTENING.exec(cli.stdout())?.[2])).toBeGreaterThan(0);
    expect((await fetch(`${cli.url}/health`)).status).toBe(200);
    expect((await post(cli.url, '/call/upsert_batch', { batch: [startItem('00000000000000a1')] }, dev)).status).toBe(200);
    cli.child.kill('SIGTERM');
    expect(await cli.exited()).toEqual({ code: 0, signal: null });
    expect(cli.stdout().split('\n').filter((line) => line !== '')).toHaveLength(1);
    expect(cli.stderr()).toBe('');
  });

  it('exits 0 on SIGINT, with users from CALLBRIDGE_USERS and an in-memory database', async () => {
    const cli = await serve(['--db', ':memory:'], { CALLBRIDGE_USERS: 'ann:pw1:acme;bo:pw2' });
    expect((await post(cli.url, '/call/read', { project_id: 'acme/x', id: '00000000000000a1' }, { username: 'ann', password: 'pw1' })).status).toBe(200);
    expect((await post(cli.url, '/call/read', { project_id: 'beta/x', id: '00000000000000a1' }, { username: 'ann', password: 'pw1' })).status).toBe(403);
    expect((await post(cli.url, '/call/read', { project_id: 'beta/x', id: '00000000000000a1' }, { username: 'bo', password: 'pw2' })).status).toBe(200);
    cli.child.kill('SIGINT');
    expect(await cli.exited()).toEqual({ code: 0, signal: null });
  });

  it('puts projects in complete mode with --complete-mode', async () => {
    const cli = await serve(['--db', ':memory:', '--user', 'dev:pw', '--complete-mode']);
    const response = await post(cli.url, '/call/upsert_batch', { batch: [startItem('00000000000000a1')] }, dev);
    expect(response.status).toBe(400);
    expect(response.body.error_code).toBe('CALLS_COMPLETE_MODE_REQUIRED');
    cli.child.kill('SIGTERM');
    expect((await cli.exited()).code).toBe(0);
  });

  it('keeps every acknowledged write across a SIGKILL of the server process', async () => {
    const dbPath = join(dir, 'crash.db');
    const first = await serve(['--db', dbPath, '--user', 'dev:pw']);
    const ids = Array.from({ length: 300 }, (_, i) => (0xc000 + i).toString(16).padStart(16, '0'));
    for (let i = 0; i < ids.length; i += 100) {
      const response = await post(first.url, '/call/upsert_batch', { batch: ids.slice(i, i + 100).map(startItem) }, dev);
      expect(response.status).toBe(200);
    }
    first.child.kill('SIGKILL');
    expect((await first.exited()).signal).toBe('SIGKILL');

    const second = await serve(['--db', dbPath, '--user', 'dev:pw']);
    const response = await post(second.url, '/calls/stream_query', { project_id: 'acme/cli' }, dev);
    const found = response.text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line).id);
    expect(found.sort()).toEqual(ids);
    second.child.kill('SIGTERM');
    expect((await second.exited()).code).toBe(0);
  });

  it('shares one database file with a second server: concurrent object versions and feedback all land', async () => {
    // obj/create and feedback/create read before they write; begun as plain (deferred)
    // transactions, the second process's write lock request failed at once (SQLITE_BUSY, a 500)
    // instead of waiting for the first's commit.
    const dbPath = join(dir, 'shared.db');
    const servers = [await serve(['--db', dbPath, '--user', 'dev:pw']), await serve(['--db', dbPath, '--user', 'dev:pw'])];
    const ref = 'weave:///acme/cli/call/00000000000000a1';
    const requests = Array.from({ length: 240 }, (_, i) => {
      const url = servers[i % 2]!.url;
      return i % 3 === 2
        ? () => post(url, '/feedback/create', { project_id: 'acme/cli', weave_ref: ref, feedback_type: 'note', payload: { note: `n${i}` } }, dev)
        : () => post(url, '/obj/create', { obj: { project_id: 'acme/cli', object_id: 'shared', val: { n: i } } }, dev);
    });
    const statuses: number[] = [];
    for (let i = 0; i < requests.length; i += 24) {
      const answers = await Promise.all(requests.slice(i, i + 24).map((send) => send()));
      statuses.push(...answers.map((answer) => answer.status));
    }
    expect(statuses.filter((status) => status !== 200)).toEqual([]);

    const versions = await post(servers[0]!.url, '/objs/query', { project_id: 'acme/cli', filter: { object_ids: ['shared'], latest_only: false } }, dev);
    const indexes = (versions.body.objs as Array<{ version_index: number }>).map((obj) => obj.version_index).sort((a, b) => a - b);
    expect(indexes).toEqual(Array.from({ length: 160 }, (_, i) => i));
    const feedback = await post(servers[1]!.url, '/feedback/query', { project_id: 'acme/cli' }, dev);
    expect(feedback.body.result).toHaveLength(80);
    for (const server of servers) server.child.kill('SIGTERM');
    await Promise.all(servers.map((server) => server.exited()));
  });

  it('prints usage for --help and exits 0', async () => {
    const cli = run(['--help']);
    expect((await cli.exited()).code).toBe(0);
    expect(cli.stdout()).toContain('Usage: callbridge serve');
  });

  it.each([
    [['serve', '--port', 'x', '--user', 'a:b'], /--port/],
    [['serve', '--bogus', '--user', 'a:b'], /^callbridge: Unknown option "--bogus"\nRun "callbridge --help" for usage\.\n$/],
    [['serve', '--bogus=1', '--user', 'a:b'], /^callbridge: Unknown option "--bogus"\n/],
    [['serve'], /No users configured/],
    [['frobnicate'], /Unknown command/],
  ])('exits 2 with a clear message for %j', async (args, message) => {
    const cli = run(args);
    expect((await cli.exited()).code).toBe(2);
    expect(cli.stderr()).toMatch(message);
    expect(cli.stderr()).not.toMatch(/\n\s+at /);
    expect(cli.stdout()).toBe('');
  });

  it('prints the version for --version and -v', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-v']) {
      const cli = run([flag]);
      expect((await cli.exited()).code).toBe(0);
      expect(cli.stdout()).toBe(`${version}\n`);
    }
  });

  it('exits 1 with one line naming the --db path when the database cannot be opened', async () => {
    for (const dbPath of [join(dir, 'no-such-dir', 'calls.db'), dir]) {
      const cli = run(['serve', '--port', '0', '--db', dbPath, '--user', 'dev:pw']);
      expect((await cli.exited()).code).toBe(1);
      expect(cli.stderr()).toMatch(/^callbridge: .*\n$/);
      expect(cli.stderr()).toContain(`(--db ${JSON.stringify(dbPath)})`);
    }
  });

  it('exits 1 with one line when the port is taken', async () => {
    const holder = await serve(['--db', ':memory:', '--user', 'dev:pw']);
    const port = new URL(holder.url).port;
    const cli = run(['serve', '--port', port, '--db', ':memory:', '--user', 'dev:pw']);
    expect((await cli.exited()).code).toBe(1);
    expect(cli.stderr()).toMatch(/^callbridge: .*EADDRINUSE.*: port \d+ is taken \(another server\?\); stop it, or pass --port N \(0 picks a free port\)\n$/);
    holder.child.kill('SIGTERM');
    await holder.exited();
  });
});
