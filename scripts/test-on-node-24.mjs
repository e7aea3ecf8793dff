#!/usr/bin/env node
/**
 * `npm test`'s second leg: the whole suite again on Node 24, the current LTS.
 *
 * Why: the local server runs on a different SQLite driver there (node:sqlite, not better-sqlite3,
 * which aborts Node 24 processes; src/server/store/sqlite.ts), so a suite run on Node 20 alone
 * would leave that driver untested. The Node 24 binary comes from the npm registry, where the
 * `node-<platform>-<arch>` packages carry Node's own release builds; it is fetched once into
 * node_modules/.cache and reused. Nothing is built or installed for it: the packages under
 * node_modules are shared with the first leg, and on Node 24 none of them is native except
 * better-sqlite3, which the server then does not load.
 *
 * Run on Node 24 or newer already, the first leg was this one, and there is nothing to add.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NODE_VERSION = '24.21.0';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CACHE = join(ROOT, 'node_modules', '.cache', 'callbridge-node', NODE_VERSION);
/**
 * Platforms whose `node-<platform>-<arch>` package on the registry has Node 24 (the darwin ones
 * stop at Node 18). Elsewhere, CALLBRIDGE_NODE_24 names a Node 24 binary to run the leg with.
 */
const PLATFORMS = new Set(['linux-x64', 'linux-arm64']);

const currentMajor = Number(process.versions.node.split('.')[0]);
if (currentMajor >= 24) {
  console.log(`test-on-node-24: the suite just ran on Node ${process.versions.node}; no second leg needed.`);
  process.exit(0);
}
const platform = `${process.platform}-${process.arch}`;
const given = process.env.CALLBRIDGE_NODE_24;
if ((given === undefined || given === '') && !PLATFORMS.has(platform)) {
  console.log(
    `test-on-node-24: skipped: the npm registry has no Node 24 binary package for ${platform}; ` +
      'set CALLBRIDGE_NODE_24=/path/to/node24 to run the suite on Node 24 (the local server uses node:sqlite there).',
  );
  process.exit(0);
}

const node = given !== undefined && given !== '' ? given : join(CACHE, 'package', 'bin', 'node');
if (!existsSync(node)) {
  if (node !== join(CACHE, 'package', 'bin', 'node')) {
    console.error(`test-on-node-24: CALLBRIDGE_NODE_24=${node}: no such file`);
    process.exit(1);
  }
  fetchNode();
}
const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
if (Number(version.slice(1).split('.')[0]) < 24) {
  console.error(`test-on-node-24: ${node} is Node ${version}, not 24 or newer`);
  process.exit(1);
}
console.log(`\ntest-on-node-24: the suite again on Node ${version} (${node})\n`);
const run = spawnSync(node, [join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...process.argv.slice(2)], {
  cwd: ROOT,
  stdio: 'inherit',
});
process.exit(run.status ?? 1);

function fetchNode() {
  const name = `node-${platform}@${NODE_VERSION}`;
  console.log(`test-on-node-24: fetching ${name} from the npm registry (once; about 30 MB)`);
  rmSync(CACHE, { recursive: true, force: true });
  mkdirSync(CACHE, { recursive: true });
  try {
    execFileSync('npm', ['pack', name, '--pack-destination', CACHE, '--silent'], { cwd: CACHE, stdio: ['ignore', 'ignore', 'inherit'] });
    const tarball = readdirSync(CACHE).find((file) => file.endsWith('.tgz'));
    if (tarball === undefined) throw new Error(`npm pack ${name} wrote no tarball`);
    execFileSync('tar', ['-xzf', tarball], { cwd: CACHE, stdio: 'inherit' });
    rmSync(join(CACHE, tarball));
  } catch (error) {
    rmSync(CACHE, { recursive: true, force: true });
    console.error(`test-on-node-24: could not fetch ${name}: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
