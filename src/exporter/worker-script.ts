/**
 * Where the delivery worker's script is: `export-worker.js` (ESM) or `export-worker.cjs` beside the
 * bundle that runs this code (`dist/index.js` / `dist/index.cjs`). tsup gives the CommonJS build an
 * `import.meta.url` shim, so one expression serves both.
 *
 * Running from the TypeScript sources (the test suite), this module is `src/exporter/*.ts` and
 * Node cannot start a `.ts` worker: the built script in `dist/` is used, which `npm test` builds
 * first. When the script is missing (an application bundler that did not copy it, or sources
 * without a build) the answer is undefined and `deliveryThread: 'auto'` delivers on the main thread.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function findWorkerScript(moduleUrl: string = import.meta.url): URL | undefined {
  const relative = moduleUrl.endsWith('.cjs')
    ? './export-worker.cjs'
    : moduleUrl.endsWith('.ts')
      ? '../../dist/export-worker.js'
      : './export-worker.js';
  const url = new URL(relative, moduleUrl);
  return url.protocol === 'file:' && existsSync(fileURLToPath(url)) ? url : undefined;
}
