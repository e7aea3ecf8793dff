import { defineConfig } from 'tsup';

// The library is built twice from the same sources: ESM (the primary form) and CommonJS for
// `require()` users. Dependencies stay external; the server's (fastify, better-sqlite3) are only
// reachable through the `callbridge/server` entry, so importing `callbridge` never loads them.
// The exporter's delivery worker is started by path (src/exporter/worker-script.ts), so it is an
// entry of its own in each format, beside the bundle that starts it.
// The CLI is a program, not a module: ESM only.
const shared = { sourcemap: true, splitting: false, target: 'node20', platform: 'node', shims: true } as const;

const libraryEntries = { index: 'src/index.ts', 'server/index': 'src/server/index.ts' };
const workerEntry = { 'export-worker': 'src/exporter/delivery-worker.ts' };

// p-queue 9 and its p-timeout are ESM-only. Node 20 can require() them, but returns the module
// namespace without an `__esModule` mark, so the CommonJS interop reads `.default` off the
// namespace wrapper and `new PQueue()` throws. The CommonJS build therefore carries its own copy.
const esmOnlyDependencies = ['p-queue', 'p-timeout'];

export default defineConfig([
  { ...shared, entry: libraryEntries, format: ['esm'], dts: true },
  { ...shared, entry: libraryEntries, format: ['cjs'], dts: true, noExternal: esmOnlyDependencies },
  { ...shared, entry: workerEntry, format: ['esm'] },
  { ...shared, entry: workerEntry, format: ['cjs'], noExternal: esmOnlyDependencies },
  { ...shared, entry: { 'cli/main': 'src/cli/main.ts' }, format: ['esm'] },
]);
