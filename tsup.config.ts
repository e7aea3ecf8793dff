import { defineConfig } from 'tsup';

// Two builds of the same sources: ESM (the primary form) and CommonJS for `require()` users.
// Dependencies stay external; the server's (fastify, better-sqlite3) are only reachable through
// the `callbridge/server` entry, so importing `callbridge` never loads them.
export default defineConfig({
  entry: {
    index: 'src/index.ts',
    'server/index': 'src/server/index.ts',
    'cli/main': 'src/cli/main.ts',
  },
  format: ['esm', 'cjs'],
  dts: { entry: { index: 'src/index.ts', 'server/index': 'src/server/index.ts' } },
  sourcemap: true,
  clean: true,
  splitting: false,
  target: 'node20',
  platform: 'node',
  shims: true,
});
