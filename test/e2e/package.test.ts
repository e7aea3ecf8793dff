/**
 * The built package as users consume it: `import` and `require` by name, what each entry loads,
 * and the `bin` from package.json. Every check runs in a fresh `node` process in the repository
 * root, where `callbridge` resolves to this package through its "exports".
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';
import { cleanEnv, ensureBuilt, ROOT, runNode } from './node-process.js';
import { defaultSqliteDriver } from '../../src/server/store/sqlite.js';

/** Names SPEC §1 fixes, plus the error classes users catch. */
const PUBLIC_NAMES = [
  'register',
  'CallbridgeExporter',
  'trace',
  'traced',
  'withThread',
  'setCallAttributes',
  'createClient',
  'DEFAULTS',
  'DEFAULT_BASE_URL',
  'CallbridgeError',
  'InvalidOptionError',
  'CallbridgeHttpError',
  'AuthError',
];

/** Packages only the local server may load. */
const SERVER_ONLY_PACKAGES = ['fastify', '@fastify/multipart', 'better-sqlite3', 'typebox'];

type ModuleSystem = 'esm' | 'cjs';

interface Probe {
  /** Export names of the entry, sorted. */
  readonly names: string[];
  /** Every package under node_modules the process loaded. */
  readonly packages: Set<string>;
  /** Results of using the entry: a traced function's return value and an option error's class. */
  readonly sum?: number;
  readonly invalidOption?: boolean;
}

let probeDir: string;

beforeAll(async () => {
  ensureBuilt();
  // ESM resolution is observed with a resolve hook (module.register) that appends every resolved
  // URL to a log synchronously, before the import it serves can complete. CommonJS loads (and
  // require(esm) entries) are in require.cache. Together they see everything a process loads.
  probeDir = await mkdtemp(join(tmpdir(), 'callbridge-e2e-'));
  await writeFile(
    join(probeDir, 'hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  appendFileSync(process.env.PROBE_LOG, result.url + '\\n');
  return result;
}
`,
  );
  await writeFile(
    join(probeDir, 'register.mjs'),
    `import { register } from 'node:module';\nregister(new URL('./hooks.mjs', import.meta.url));\n`,
  );
}, 120_000);

afterAll(async () => {
  await rm(probeDir, { recursive: true, force: true });
});

const USE_MAIN_ENTRY = `
  const add = m.trace(function add(a, b) { return a + b; });
  let invalidOption = false;
  try { new m.CallbridgeExporter({ projectId: 'no-slash' }); } catch (error) { invalidOption = error instanceof m.InvalidOptionError; }
  result.sum = add(2, 3);
  result.invalidOption = invalidOption;`;

/** Load `entry` in a fresh process with `system`, and report what it exports and what got loaded. */
async function probe(entry: string, system: ModuleSystem, use = ''): Promise<Probe> {
  const log = join(probeDir, `resolved-${entry.replace('/', '-')}-${system}.log`);
  await writeFile(log, '');
  const body =
    system === 'esm'
      ? `const m = await import(${JSON.stringify(entry)});
         const { createRequire } = await import('node:module');
         const { readFileSync } = await import('node:fs');
         const result = { names: Object.keys(m).sort() };
         ${use}
         result.files = [...Object.keys(createRequire(import.meta.url).cache), ...readFileSync(process.env.PROBE_LOG, 'utf8').split('\\n')];
         console.log(JSON.stringify(result));`
      : `const m = require(${JSON.stringify(entry)});
         const result = { names: Object.keys(m).sort() };
         ${use}
         result.files = Object.keys(require.cache);
         console.log(JSON.stringify(result));`;
  const args = system === 'esm' ? ['--import', join(probeDir, 'register.mjs'), '--input-type=module', '-e', body] : ['-e', body];
  const run = await runNode(args, { env: cleanEnv({ PROBE_LOG: log }) });
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const result = JSON.parse(run.stdout) as Omit<Probe, 'packages'> & { files: string[] };
  const packages = new Set<string>();
  for (const file of result.files) {
    const name = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1];
    if (name !== undefined) packages.add(name);
  }
  return { ...result, packages };
}

describe('import and require by name', () => {
  for (const system of ['esm', 'cjs'] as const) {
    it(`${system}: exposes the public names, and they work`, async () => {
      const loaded = await probe('callbridge', system, USE_MAIN_ENTRY);
      expect(loaded.names).toEqual(expect.arrayContaining(PUBLIC_NAMES));
      expect(loaded.sum).toBe(5);
      expect(loaded.invalidOption).toBe(true);
    });
  }

  it('treats an option error from the server entry or the other module system as an InvalidOptionError', async () => {
    // Each bundle carries its own copy of the class; the check is by brand, not by prototype.
    const script = `
      const { createRequire } = await import('node:module');
      const esm = await import('callbridge');
      const cjs = createRequire(import.meta.url)('callbridge');
      const { startServer } = await import('callbridge/server');
      const fromServer = await startServer({ port: -1 }).catch((error) => error);
      let fromCjs;
      try { new cjs.CallbridgeExporter({ projectId: 'no-slash' }); } catch (error) { fromCjs = error; }
      console.log(JSON.stringify({
        server: [fromServer instanceof esm.InvalidOptionError, fromServer instanceof cjs.InvalidOptionError, fromServer instanceof TypeError],
        cjs: [fromCjs instanceof esm.InvalidOptionError, fromCjs instanceof cjs.InvalidOptionError],
        others: [new TypeError('x') instanceof esm.InvalidOptionError, new esm.CallbridgeError('x', 'X') instanceof esm.InvalidOptionError, fromServer instanceof esm.CallbridgeError],
      }));`;
    const run = await runNode(['--input-type=module', '-e', script], { env: cleanEnv() });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ server: [true, true, true], cjs: [true, true], others: [false, false, false] });
  });

  it('gives both module systems the same names', async () => {
    const [esm, cjs] = await Promise.all([probe('callbridge', 'esm'), probe('callbridge', 'cjs')]);
    expect(cjs.names).toEqual(esm.names);
    const [esmServer, cjsServer] = await Promise.all([probe('callbridge/server', 'esm'), probe('callbridge/server', 'cjs')]);
    expect(esmServer.names).toContain('startServer');
    expect(cjsServer.names).toEqual(esmServer.names);
  });
});

describe('the exporter, as shipped', () => {
  // `worker` also checks that export-worker.js / .cjs is found beside the bundle that starts it;
  // `main` that the batcher's ESM-only dependency (p-queue) loads under require() too.
  const cases = [
    ['esm', 'worker'],
    ['cjs', 'worker'],
    ['cjs', 'main'],
  ] as const;
  for (const [system, thread] of cases) {
    it(`${system}: delivers a span with deliveryThread '${thread}'`, async () => {
      const server = await startTestServer();
      try {
        const load = system === 'esm' ? `const m = await import('callbridge');` : `const m = require('callbridge');`;
        const script = `${load}
          const tracing = m.register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/shipped-${system}',
            username: 'dev', password: 'pw', global: false, deliveryThread: '${thread}' });
          tracing.provider.getTracer('t').startSpan('shipped').end();
          tracing.forceFlush().then(() => console.log(JSON.stringify(tracing.exporter.stats())));`;
        const args = system === 'esm' ? ['--input-type=module', '-e', script] : ['-e', script];
        const run = await runNode(args, { env: cleanEnv({ SERVER_URL: server.url }) });
        expect(run.stderr).toBe('');
        expect(run.code).toBe(0);
        expect(JSON.parse(run.stdout)).toMatchObject({ delivered: 1, queued: 0 });
      } finally {
        await server.close();
      }
    });
  }
});

describe('what importing an entry loads', () => {
  for (const system of ['esm', 'cjs'] as const) {
    it(`${system}: 'callbridge' loads none of the server's dependencies`, async () => {
      const { packages } = await probe('callbridge', system);
      // The probe sees packages at all: the exporter's own dependencies are there.
      expect(packages).toContain('@opentelemetry/api');
      expect(packages).toContain('undici');
      for (const name of SERVER_ONLY_PACKAGES) expect(packages, `${name} was loaded`).not.toContain(name);
    });

    it(`${system}: 'callbridge/server' does load them (the probe can see them)`, async () => {
      const { packages } = await probe('callbridge/server', system);
      expect(packages).toContain('fastify');
      expect(packages).toContain('typebox');
    });

    it(`${system}: 'callbridge/server' loads its SQLite driver only when a server opens its database`, async () => {
      const started = "const server = await m.startServer({ port: 0, dbPath: ':memory:', users: [{ username: 'dev', password: 'pw', entities: ['*'] }] }); await server.close();";
      const { packages } = await probe('callbridge/server', system, system === 'esm' ? started : `(async () => { ${started} })();`);
      // On Node >= 24 the driver is node:sqlite, part of Node (store/sqlite.ts).
      expect(packages.has('better-sqlite3')).toBe(defaultSqliteDriver(cleanEnv()) === 'better-sqlite3');
    });
  }
});

describe('when better-sqlite3 cannot load (an optional dependency whose native build failed)', () => {
  it('the server says why and how to fix it, or runs on node:sqlite where Node has it', async () => {
    const hook = join(probeDir, 'no-better-sqlite3.cjs');
    await writeFile(
      hook,
      `const Module = require('node:module');
       const load = Module._load;
       Module._load = function (request, ...rest) {
         if (request === 'better-sqlite3') throw new Error('Could not locate the bindings file (build failed)');
         return load.call(this, request, ...rest);
       };`,
    );
    const script = `import { startServer } from 'callbridge/server';
      try {
        const server = await startServer({ port: 0, dbPath: ':memory:', users: [{ username: 'dev', password: 'pw', entities: ['*'] }] });
        await server.close();
        console.log(JSON.stringify({ started: true }));
      } catch (error) {
        console.log(JSON.stringify({ message: error.message, cause: error.cause?.message }));
      }`;
    const run = await runNode(['-r', hook, '--input-type=module', '-e', script]);
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as { started?: boolean; message?: string; cause?: string };
    const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
    if (major > 22 || (major === 22 && minor >= 16)) {
      expect(result).toEqual({ started: true });
    } else {
      expect(result.message).toBe(
        `The local server needs better-sqlite3 on Node ${process.versions.node}, and it did not load: ` +
          'Could not locate the bindings file (build failed). Reinstall it (npm rebuild better-sqlite3; a build from source needs python3, make and g++)',
      );
      expect(result.cause).toBe('Could not locate the bindings file (build failed)');
    }
  });
});

describe('what `npm pack` puts in the package', () => {
  it('holds the license, the README and every file an entry loads, and no sources or tests', () => {
    // --ignore-scripts: no prepack build while other tests use dist/.
    const packed = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' });
    expect(packed.status, packed.stderr).toBe(0);
    const [pack] = JSON.parse(packed.stdout) as Array<{ files: Array<{ path: string }> }>;
    const paths = pack!.files.map((file) => file.path);
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { license: string };
    expect(manifest.license).toBe('Apache-2.0');
    expect(readFileSync(join(ROOT, 'LICENSE'), 'utf8')).toContain('Apache License\n                           Version 2.0');
    expect(paths).toEqual(
      expect.arrayContaining([
        'LICENSE',
        'README.md',
        'package.json',
        'dist/THIRD_PARTY_LICENSES.txt',
        'dist/index.js',
        'dist/index.cjs',
        'dist/index.d.ts',
        'dist/index.d.cts',
        'dist/export-worker.js',
        'dist/export-worker.cjs',
        'dist/server/index.js',
        'dist/server/index.cjs',
        'dist/server/index.d.ts',
        'dist/cli/main.js',
      ]),
    );
    expect(paths.filter((path) => !path.startsWith('dist/') && !['LICENSE', 'README.md', 'package.json'].includes(path))).toEqual([]);
  });
});

describe('the package bin', () => {
  it('`callbridge serve --port 0` prints the listening line, serves, and stops on SIGTERM', async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    const bin = pkg.bin.callbridge;
    expect(bin).toBeDefined();
    expect(readFileSync(join(ROOT, bin!), 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);

    const child = spawn(process.execPath, [join(ROOT, bin!), 'serve', '--port', '0', '--db', ':memory:', '--user', 'dev:pw:*'], {
      cwd: ROOT,
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
    try {
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8');
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const line = await new Promise<string>((done, fail) => {
        child.stdout.on('data', (chunk: string) => {
          stdout += chunk;
          if (stdout.includes('\n')) done(stdout);
        });
        child.on('close', () => fail(new Error(`serve exited before listening: ${stdout}${stderr}`)));
      });
      const match = /^callbridge listening on (http:\/\/127\.0\.0\.1:(\d+))\n$/.exec(line);
      expect(match).not.toBeNull();
      expect(Number(match![2])).toBeGreaterThan(0);
      const health = await fetch(`${match![1]}/health`);
      expect(health.status).toBe(200);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
