/**
 * Where the built package is: `dist/` of this checkout, or the directory named by
 * CALLBRIDGE_BENCH_DIST (to benchmark another build side by side without rebuilding this one).
 */
import { cpSync, existsSync, rmSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

// Read when asked, not at import: run.mjs points the variable at its snapshot after importing us.
const base = () =>
  process.env.CALLBRIDGE_BENCH_DIST
    ? pathToFileURL(`${process.env.CALLBRIDGE_BENCH_DIST.replace(/\/+$/, '')}/`)
    : new URL('../../dist/', import.meta.url);

/** file: URL of `relative` inside the build (e.g. `index.js`, `server/index.js`). */
export const distUrl = (relative) => new URL(relative, base());

/** Whether the build has `relative`. */
export const hasDist = (relative) => existsSync(distUrl(relative));

/** Import the package's main entry (`callbridge`). */
export const importCallbridge = () => import(distUrl('index.js').href);

/** Import the server entry (`callbridge/server`). */
export const importServer = () => import(distUrl('server/index.js').href);

/**
 * Copy the build to `dir` (inside the checkout, so its imports still resolve from node_modules)
 * and return that path, or undefined when there is no build to copy.
 */
export function snapshotDist(dir) {
  if (!hasDist('index.js') && !hasDist('server/index.js')) return undefined;
  rmSync(dir, { recursive: true, force: true });
  cpSync(fileURLToPath(base()), dir, { recursive: true });
  return dir;
}
