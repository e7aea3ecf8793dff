/**
 * The Node flags the delivery worker starts with (src/exporter/worker-start-options.ts): what it
 * takes from the application, and how refused flags are left out. `startWorker` is run against
 * real workers, so Node's own checks and messages are what it answers to. Starting the exporter's
 * worker under such flags, end to end, is in log.test.ts.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { inheritedStartOptions, splitNodeOptions, startWorker, type InheritedStartOptions } from '../../src/exporter/worker-start-options.js';

describe('inheritedStartOptions', () => {
  it("leaves the worker Node's defaults unless --input-type or a preload is in the flags or NODE_OPTIONS", () => {
    const env = { NODE_OPTIONS: '--max-old-space-size=512', HOME: '/home/dev' };
    expect(inheritedStartOptions(['--max-old-space-size=4096', '--expose-gc', '--enable-source-maps'], env)).toEqual({});
  });

  it('drops the preloads, in every spelling, from the flags', () => {
    const flags = ['-r', 'dd-trace/init', '--expose-gc', '--require=./otel.cjs', '--import', 'tsx', '--import=@sentry/node/preload'];
    const more = ['--loader', 'ts-node/esm', '--experimental-loader=./hooks.mjs', '--experimental_loader', './h.mjs', '--enable-source-maps'];
    expect(inheritedStartOptions([...flags, ...more], {})).toEqual({ execArgv: ['--expose-gc', '--enable-source-maps'] });
  });

  it('drops --input-type, in every spelling, from the flags', () => {
    expect(inheritedStartOptions(['--input-type=module', '-e', 'code'], {})).toEqual({ execArgv: ['-e', 'code'] });
    expect(inheritedStartOptions(['--input-type', 'commonjs', '--enable-source-maps'], {})).toEqual({ execArgv: ['--enable-source-maps'] });
    expect(inheritedStartOptions(['--input_type=module', '-e', 'code'], {})).toEqual({ execArgv: ['-e', 'code'] });
  });

  it('moves what NODE_OPTIONS keeps into execArgv, ahead of the flags, when it leaves something out there or in the flags', () => {
    const env = { NODE_OPTIONS: '--require @opentelemetry/auto-instrumentations-node/register --max-old-space-size=512 --import=tsx', HOME: '/h' };
    expect(inheritedStartOptions(['--enable-source-maps'], env)).toEqual({
      execArgv: ['--max-old-space-size=512', '--enable-source-maps'],
      env: { HOME: '/h' },
    });
    const inputType = { NODE_OPTIONS: '--enable-source-maps --input-type=module --input-type commonjs', HOME: '/h' };
    expect(inheritedStartOptions([], inputType)).toEqual({ execArgv: ['--enable-source-maps'], env: { HOME: '/h' } });
    expect(inheritedStartOptions(['--import', 'tsx'], { NODE_OPTIONS: '--no-deprecation', HOME: '/h' })).toEqual({
      execArgv: ['--no-deprecation'],
      env: { HOME: '/h' },
    });
  });

  it('reads NODE_OPTIONS as Node does: quoted values with backslash escapes; quotes alone make no argument', () => {
    const text = '--require "/srv/my app/agent.cjs"  --title "a \\"quoted\\" \\\\ name" --enable-source-maps';
    expect(splitNodeOptions(text)).toEqual(['--require', '/srv/my app/agent.cjs', '--title', 'a "quoted" \\ name', '--enable-source-maps']);
    expect(inheritedStartOptions([], { NODE_OPTIONS: text }).execArgv).toEqual(['--title', 'a "quoted" \\ name', '--enable-source-maps']);
    expect(splitNodeOptions('"" --expose-gc "" "\\""')).toEqual(['--expose-gc', '"']);
    // Unterminated: Node refuses to start with it, so the process never gets here with one.
    expect(splitNodeOptions('--require "agent.cjs')).toBeUndefined();
  });
});

describe('startWorker', () => {
  /** A worker's code that reports the flags it runs with, then ends. */
  const REPORTS_ITS_FLAGS = "require('node:worker_threads').parentPort.postMessage(process.execArgv)";

  /** Starts a real worker that reports the flags it runs with. */
  async function flagsOfWorkerStartedWith(inherited: InheritedStartOptions): Promise<string[]> {
    const worker = startWorker(
      (options) => new Worker(REPORTS_ITS_FLAGS, { eval: true, ...options }),
      inherited,
    );
    const [flags] = await Promise.all([
      new Promise<string[]>((resolve) => worker.once('message', resolve)),
      new Promise((resolve) => worker.once('exit', resolve)),
    ]);
    return flags;
  }

  it("leaves out the whole process's flags that a worker refuses, keeping the rest", async () => {
    const execArgv = ['--max-old-space-size=300', '--title', 'callbridge test', '--enable-source-maps', '--use_openssl_ca', '--no-deprecation'];
    expect(await flagsOfWorkerStartedWith({ execArgv })).toEqual(['--enable-source-maps', '--no-deprecation']);
  });

  it('starts with flags moved from NODE_OPTIONS, leaving out those Node allows there but not in a worker', async () => {
    const inherited = inheritedStartOptions([], { ...process.env, NODE_OPTIONS: '--require ./agent.cjs --use-openssl-ca --title x --unhandled-rejections=strict' });
    expect(await flagsOfWorkerStartedWith(inherited)).toEqual(['--unhandled-rejections=strict']);
  });

  it('starts with no flags when leaving out the named ones is not enough, and throws any other error', async () => {
    let attempts = 0;
    const flags = await new Promise<string[]>((resolve, reject) => {
      try {
        const worker = startWorker((options) => {
          attempts += 1;
          // A worker that refuses every flag it is given, as Node words it.
          if (options.execArgv?.length !== 0) throw Object.assign(new Error('Initiated Worker with invalid execArgv flags: --a'), { code: 'ERR_WORKER_INVALID_EXEC_ARGV' });
          return new Worker(REPORTS_ITS_FLAGS, { eval: true, ...options });
        }, { execArgv: ['--a', '--b'] });
        worker.once('message', resolve);
      } catch (error) {
        reject(error);
      }
    });
    expect(flags).toEqual([]);
    // With both flags, without --a (still refused), with none.
    expect(attempts).toBe(3);
    const broken = new Error('no such file');
    expect(() => startWorker(() => { throw broken; }, { execArgv: ['--a'] })).toThrow(broken);
  });
});
