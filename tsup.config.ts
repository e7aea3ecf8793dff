import { defineConfig } from 'tsup';

// The library is built twice from the same sources: ESM (the primary form) and CommonJS for
// `require()` users. Dependencies stay external; the server's (fastify, better-sqlite3) are only
// reachable through the `callbridge/server` entry, so importing `callbridge` never loads them.
// The CLI is a program, not a module: ESM only.
const shared = { sourcemap: true, splitting: false, target: 'node20', platform: 'node', shims: true } as const;

export default defineConfig([
  {
    ...shared,
    entry: { index: 'src/index.ts', 'server/index': 'src/server/index.ts' },
    format: ['esm', 'cjs'],
    dts: true,
  },
  {
    ...shared,
    entry: { 'cli/main': 'src/cli/main.ts' },
    format: ['esm'],
  },
]);
