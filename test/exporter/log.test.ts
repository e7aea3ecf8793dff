/**
 * Where callbridge's messages go (src/log.ts): to `diag` always, and to stderr from `logLevel` up
 * when the application has registered no `diag` logger. The unit tests watch `console` (what the
 * fallback writes to); the scripts run the built package in a child process against the real
 * local server with a wrong password, the mistake a new user makes first, on both delivery threads,
 * and start the delivery worker under the application's Node flags.
 */
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { format } from 'node:util';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { apiAccepts, apiIsBundled, createLog, hasDiagLogger, MAX_PRINTED_CHARS } from '../../src/log.js';
import { killSpawned } from '../helpers/node-process.js';
import { runPackageScript } from '../helpers/package-script.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const PRELOAD = join(import.meta.dirname, '..', 'fixtures', 'preload-reports-thread.cjs');

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());
afterEach(killSpawned);

describe('createLog', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    diag.disable();
  });

  /** What the fallback prints, line by line, per console method. */
  function watchConsole() {
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const lines = (spy: typeof error) => spy.mock.calls.map((args) => format(...args));
    return { error: () => lines(error), warn: () => lines(warn) };
  }

  it('prints errors and warnings to stderr by default when no diag logger is registered', () => {
    const printed = watchConsole();
    expect(hasDiagLogger()).toBe(false);
    const log = createLog('warn');
    log.error('callbridge: refused');
    log.warn('callbridge: dropped');
    log.info('callbridge: back-pressure');
    expect(printed.error()).toEqual(['callbridge: refused']);
    expect(printed.warn()).toEqual(['callbridge: dropped']);
  });

  it('prints from the level asked for: none, error, info', () => {
    const printed = watchConsole();
    for (const level of ['none', 'error', 'info'] as const) {
      const log = createLog(level);
      log.error(`${level}: error`);
      log.warn(`${level}: warn`);
      log.info(`${level}: info`);
    }
    expect(printed.error()).toEqual(['error: error', 'info: error']);
    expect(printed.warn()).toEqual(['info: warn', 'info: info']);
  });

  it('with a diag logger registered, says everything there (at its level) and prints nothing', () => {
    const printed = watchConsole();
    const logged: string[] = [];
    const logger = { error: (m: string) => logged.push(`error ${m}`), warn: (m: string) => logged.push(`warn ${m}`), info: (m: string) => logged.push(`info ${m}`), debug: () => {}, verbose: () => {} };
    diag.setLogger(logger, DiagLogLevel.WARN);
    expect(hasDiagLogger()).toBe(true);
    const log = createLog('info');
    log.error('a');
    log.warn('b');
    log.info('c');
    expect(logged).toEqual(['error a', 'warn b']);
    expect(printed.error()).toEqual([]);
    expect(printed.warn()).toEqual([]);

    diag.disable();
    log.warn('d');
    expect(printed.warn()).toEqual(['d']);
  });

  it('prints when the registered logger sits in a slot our copy of the API ignores (an older minor)', () => {
    const printed = watchConsole();
    const slotKey = Symbol.for('opentelemetry.js.api.1');
    const globals = globalThis as unknown as Record<symbol, unknown>;
    const realSlot = globals[slotKey];
    const logged: string[] = [];
    const logger = { error: (m: string) => logged.push(m), warn: (m: string) => logged.push(m), info() {}, debug() {}, verbose() {} };
    try {
      globals[slotKey] = { version: '1.0.0', diag: logger };
      expect(hasDiagLogger()).toBe(false);
      createLog('warn').warn('callbridge: dropped');
      expect(logged).toEqual([]); // our diag calls do not reach it...
      expect(printed.warn()).toEqual(['callbridge: dropped']); // ...so it is printed
      globals[slotKey] = { version: '1.999.0', diag: logger };
      expect(hasDiagLogger()).toBe(true);
    } finally {
      globals[slotKey] = realSlot;
    }
    expect([apiAccepts('1.9.0', '1.9.0'), apiAccepts('1.9.0', '1.10.2'), apiAccepts('1.9.0', '1.8.0'), apiAccepts('1.9.0', '2.0.0'), apiAccepts('1.9.0', 'x')]).toEqual([
      true, true, false, false, false,
    ]);
  });

  it("prints a server's hostile reason as one inert line of bounded length; diag gets it as it came", () => {
    const printed = watchConsole();
    const logged: string[] = [];
    const hostile = 'callbridge: rejected (last: \u001b[2J\u001b[31mfake\r\nsecond line \u202eevil %s %d %%)';
    createLog('warn').warn(hostile);
    expect(printed.warn()).toEqual([
      'callbridge: rejected (last: \\u001b[2J\\u001b[31mfake\\u000d\\u000asecond line \\u202eevil %s %d %%)',
    ]);

    createLog('warn').warn(`callbridge: ${'x'.repeat(MAX_PRINTED_CHARS * 5)}`);
    const long = printed.warn()[1]!;
    expect(long).toHaveLength(MAX_PRINTED_CHARS + '…[8012 more characters]'.length);
    expect(long.endsWith('…[8012 more characters]')).toBe(true);

    diag.setLogger({ error() {}, warn: (m: string) => logged.push(m), info() {}, debug() {}, verbose() {} }, DiagLogLevel.WARN);
    createLog('warn').warn(hostile);
    expect(logged).toEqual([hostile]);
  });

  it('never throws when the console it prints to, or the diag logger, does', () => {
    vi.spyOn(console, 'error').mockImplementation(() => {
      throw new Error('console is broken');
    });
    expect(() => createLog('warn').error('callbridge: refused')).not.toThrow();
    const throwing = () => {
      throw new Error('logger is broken');
    };
    diag.setLogger({ error: throwing, warn: throwing, info: throwing, debug() {}, verbose() {} }, DiagLogLevel.INFO);
    expect(() => createLog('warn').error('callbridge: refused')).not.toThrow();
  });

  // Module state: apiIsBundled() stays in force for the rest of this file, so it comes last here
  // (the scripts below run in processes of their own).
  it('takes a registered logger as reached once told the API is bundled (the delivery worker), whatever the slot says', () => {
    const slotKey = Symbol.for('opentelemetry.js.api.1');
    const globals = globalThis as unknown as Record<symbol, unknown>;
    const realSlot = globals[slotKey];
    const logger = { error() {}, warn() {}, info() {}, debug() {}, verbose() {} };
    try {
      globals[slotKey] = { version: '1.0.0', diag: logger };
      expect(hasDiagLogger()).toBe(false);
      apiIsBundled();
      expect(hasDiagLogger()).toBe(true);
      globals[slotKey] = { version: '1.0.0' };
      expect(hasDiagLogger()).toBe(false);
    } finally {
      globals[slotKey] = realSlot;
    }
  });
});

describe('a script with a wrong password', () => {
  /** Five traced calls sent with a wrong password, as a script that then simply ends. */
  async function run(deliveryThread: 'main' | 'worker', { env = {}, diagLogger = false } = {}) {
    const source = `
const { diag, DiagLogLevel } = await import('@opentelemetry/api');
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const logged = [];
if (${diagLogger}) diag.setLogger({ error: (m) => logged.push(m), warn: (m) => logged.push(m), info() {}, debug() {}, verbose() {} }, DiagLogLevel.WARN);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/logs', username: 'dev', password: 'wrong', deliveryThread: '${deliveryThread}' });
const hello = trace(function hello(x) { return x + 1; });
for (let i = 0; i < 5; i++) hello(i);
// The flush waits for the worker to load, so its messages are the worker's, forwarded.
await tracing.forceFlush();
process.on('exit', () => console.log(JSON.stringify({ dropped: tracing.exporter.stats().dropped.auth, logged })));
`;
    const script = await runPackageScript(source, { SERVER_URL: server.url, ...env });
    expect(script.code).toBe(0);
    const result = JSON.parse(script.stdout.trim()) as { dropped: number; logged: string[] };
    expect(result.dropped).toBe(5);
    return { stderr: script.stderr, logged: result.logged };
  }

  const refused = /refused the credentials of user "dev" \(HTTP 401\)/;

  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`says so on stderr once, with the drops (${deliveryThread} thread)`, async () => {
      const { stderr } = await run(deliveryThread);
      const lines = stderr.trim().split('\n');
      expect(lines.filter((line) => refused.test(line))).toHaveLength(1);
      expect(lines.filter((line) => line.includes('callbridge: dropped spans: auth=5'))).toHaveLength(1);
      expect(lines).toHaveLength(2); // none about the delivery worker: it ran
    });

    it(`says it only to the application's diag logger when there is one (${deliveryThread} thread)`, async () => {
      const { stderr, logged } = await run(deliveryThread, { diagLogger: true });
      expect(stderr).toBe('');
      expect(logged.filter((line) => refused.test(line))).toHaveLength(1);
      expect(logged.filter((line) => line.includes('dropped spans: auth=5'))).toHaveLength(1);
    });
  }

  it('reports the drops made after a flush too, when the script ends (both threads)', async () => {
    for (const deliveryThread of ['main', 'worker']) {
      const script = await runPackageScript(
        `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/logs', username: 'dev', password: 'wrong', deliveryThread: '${deliveryThread}' });
const hello = trace(function hello(x) { return x + 1; });
hello(0);
await tracing.forceFlush(); // reports auth=1; the next report is an interval (10 s) away...
for (let i = 1; i < 5; i++) hello(i); // ...so these four are reported by the exit flush
`,
        { SERVER_URL: server.url },
      );
      const drops = script.stderr.split('\n').filter((line) => line.includes('dropped spans'));
      expect(drops.map((line) => /auth=(\d+)/.exec(line)?.[1]), deliveryThread).toEqual(['1', '4']);
    }
  });

  it('goes back to one drop report per interval when a beforeExit listener revives the process (worker thread)', async () => {
    const script = await runPackageScript(
      `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/logs', username: 'dev', password: 'wrong', deliveryThread: 'worker' });
const hello = trace(function hello(x) { return x + 1; });
hello(0);
await tracing.forceFlush(); // the worker is loaded, and its first report (auth=1) is made
let revived = false;
process.on('beforeExit', () => {
  if (revived) return;
  revived = true;
  // After the exit flush has started: more work, flushed often, as a revived app would.
  setTimeout(async () => {
    for (let i = 1; i <= 12; i++) {
      hello(i);
      await tracing.forceFlush();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }, 500);
});
`,
      { SERVER_URL: server.url },
    );
    const drops = script.stderr.split('\n').filter((line) => line.includes('dropped spans'));
    // The first flush's report, at most one more within the interval, and the last exit flush's:
    // not one per flush, as when the exit flush's habits stayed on (13 lines).
    expect(drops.length).toBeGreaterThanOrEqual(2);
    expect(drops.length).toBeLessThanOrEqual(3);
    expect(drops.map((line) => Number(/auth=(\d+)/.exec(line)?.[1])).reduce((a, b) => a + b, 0)).toBe(13);
  });

  it('prints nothing with CALLBRIDGE_LOG_LEVEL=none, and still counts the drops', async () => {
    const { stderr } = await run('worker', { env: { CALLBRIDGE_LOG_LEVEL: 'none' } });
    expect(stderr).toBe('');
  });
});

describe("the delivery worker, under the application's Node flags", () => {
  // Each would stop a file worker from starting, or be refused by a worker given execArgv.
  const setups: Array<{ name: string; flags: string[]; env?: Record<string, string> }> = [
    { name: '--input-type=module -e', flags: [] },
    { name: 'with V8 and heap flags too', flags: ['--max-old-space-size=512', '--expose-gc', '--stack-size=900'] },
    { name: '--input-type in NODE_OPTIONS', flags: [], env: { NODE_OPTIONS: '--input-type=module' } },
  ];
  for (const { name, flags, env = {} } of setups) {
    it(`starts and delivers (${name})`, async () => {
      const script = await runPackageScript(
        `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/flags', username: 'dev', password: 'pw', deliveryThread: 'worker' });
trace(function hello(x) { return x; })(1);
await tracing.forceFlush();
console.log(JSON.stringify(tracing.exporter.stats()));
`,
        { SERVER_URL: server.url, ...env },
        flags,
      );
      expect(script.stderr).toBe('');
      expect(JSON.parse(script.stdout.trim())).toMatchObject({ delivered: 1, queued: 0 });
    });
  }

  // An APM agent or an auto-instrumentation preloaded this way would otherwise start a second
  // agent or SDK inside the worker; the worker's own file needs no preload to load.
  const preloads: Array<{ name: string; flags: string[]; env?: (preload: string) => Record<string, string> }> = [
    { name: '--require and --import', flags: ['--require', PRELOAD, `--import=${pathToFileURL(PRELOAD).href}`] },
    { name: 'NODE_OPTIONS, a quoted path with a space', flags: [], env: (preload) => ({ NODE_OPTIONS: `--enable-source-maps --require "${preload}"` }) },
    // Flags of the whole process, which a worker given its flags refuses: left out, as they apply anyway.
    {
      name: 'with flags a worker refuses, in NODE_OPTIONS and on the command line',
      flags: ['--stack-size=900', '-r', PRELOAD],
      env: (preload) => ({ NODE_OPTIONS: `--require "${preload}" --use-openssl-ca --title callbridge-test --max-old-space-size=512` }),
    },
  ];
  for (const { name, flags, env } of preloads) {
    it(`runs the application's preloads on its thread only (${name})`, async () => {
      const dir = await mkdtemp(join(tmpdir(), 'callbridge preload '));
      try {
        const preload = join(dir, 'preload.cjs');
        await copyFile(PRELOAD, preload);
        const script = await runPackageScript(
          `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/preloads', username: 'dev', password: 'pw', deliveryThread: 'worker' });
trace(function hello(x) { return x; })(1);
await tracing.forceFlush();
console.log(JSON.stringify({ preloaded: globalThis.preloadedOnMainThread === true, ...tracing.exporter.stats() }));
`,
          { SERVER_URL: server.url, ...env?.(preload) },
          flags,
        );
        expect(script.stderr).toBe('');
        expect(JSON.parse(script.stdout.trim())).toMatchObject({ preloaded: true, delivered: 1, queued: 0 });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
});
