import { defineConfig } from 'tsup';

// The library is built twice from the same sources: ESM (the primary form) and CommonJS for
// `require()` users. Dependencies stay external; the server's (fastify, better-sqlite3) are only
// reachable through the `callbridge/server` entry, so importing `callbridge` never loads them.
// The exporter's delivery worker is started by path (src/exporter/worker-script.ts), so it is an
// entry of its own in each format, beside the bundle that starts it. It carries its dependencies
// (undici, p-queue, the OpenTelemetry API) and needs no module resolution: it starts without the
// application's preloads (worker-start-options.ts), such as Yarn PnP's resolver, and one file
// loads faster than many (first span delivered 139-151 ms after `register()`, against 192-212 ms,
// 8 alternated runs, 2026-11-24). The ESM form gets a `require` for the CommonJS code it carries
// (undici requires Node's built-in modules).
// The CLI is a program, not a module: ESM only.
const shared = { sourcemap: true, splitting: false, target: 'node20', platform: 'node', shims: true } as const;

const libraryEntries = { index: 'src/index.ts', 'server/index': 'src/server/index.ts' };
const workerEntry = { 'export-worker': 'src/exporter/delivery-worker.ts' };

// p-queue 9 and its p-timeout are ESM-only. Node 20 can require() them, but returns the module
// namespace without an `__esModule` mark, so the CommonJS interop reads `.default` off the
// namespace wrapper and `new PQueue()` throws. The CommonJS build therefore carries its own copy.
const esmOnlyDependencies = ['p-queue', 'p-timeout'];
// No source maps: the worker's errors reach the application as messages, never as stack traces,
// and its maps (undici's mostly) would add 4.4 MB to the package. `node:` prefixes are kept: undici
// requires `node:sqlite`, a module that exists only under that name.
const selfContained = { noExternal: [/./], sourcemap: false, removeNodeProtocol: false } as const;
const requireInEsm = "import { createRequire as createWorkerRequire } from 'node:module'; const require = createWorkerRequire(import.meta.url);";

export default defineConfig([
  { ...shared, entry: libraryEntries, format: ['esm'], dts: true },
  { ...shared, entry: libraryEntries, format: ['cjs'], dts: true, noExternal: esmOnlyDependencies },
  { ...shared, ...selfContained, entry: workerEntry, format: ['esm'], banner: { js: requireInEsm } },
  { ...shared, ...selfContained, entry: workerEntry, format: ['cjs'] },
  { ...shared, entry: { 'cli/main': 'src/cli/main.ts' }, format: ['esm'] },
]);
