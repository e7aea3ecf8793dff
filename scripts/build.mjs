/**
 * `npm run build`: a clean `dist/`, then tsup (with this script's arguments: `npm run build --
 * --silent` quiets it), then `dist/THIRD_PARTY_LICENSES.txt` for the code tsup copied into the
 * bundles (third-party-licenses.mjs).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const root = join(import.meta.dirname, '..');
rmSync(join(root, 'dist'), { recursive: true, force: true });

const manifest = createRequire(import.meta.url).resolve('tsup/package.json');
const tsupCli = join(dirname(manifest), JSON.parse(readFileSync(manifest, 'utf8')).bin.tsup);
const tsup = spawnSync(process.execPath, [tsupCli, ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
if (tsup.status !== 0) process.exit(tsup.status ?? 1);

await import('./third-party-licenses.mjs');
