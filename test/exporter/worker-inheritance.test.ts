/**
 * What the delivery worker takes from the application's Node set-up (src/exporter/
 * worker-inheritance.ts): everything but `--input-type` and preloads, from the flags and from
 * `NODE_OPTIONS`, read as Node reads it. Real workers started under these flags: log.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { inheritedStartOptions, splitNodeOptions } from '../../src/exporter/worker-inheritance.js';

describe('inheritedStartOptions', () => {
  it("leaves the worker Node's defaults when nothing is to be left out", () => {
    const env = { NODE_OPTIONS: '--max-old-space-size=512 --enable-source-maps', HOME: '/home/dev' };
    expect(inheritedStartOptions(['--max-old-space-size=4096', '--expose-gc', '--conditions', 'development'], env)).toEqual({});
    expect(inheritedStartOptions([], {})).toEqual({});
  });

  it('leaves out --input-type and preloads, with their values, in both spellings', () => {
    expect(inheritedStartOptions(['--input-type=module', '-e', 'code'], {})).toEqual({ execArgv: ['-e', 'code'] });
    expect(inheritedStartOptions(['--input-type', 'commonjs', '--enable-source-maps'], {})).toEqual({ execArgv: ['--enable-source-maps'] });
    const preloads = ['--import', './tracing.mjs', '--import=tsx', '-r', 'dotenv/config', '--require=./a.cjs', '--loader', 'ts-node/esm', '--experimental-loader=x'];
    expect(inheritedStartOptions([...preloads, '--expose-gc'], {})).toEqual({ execArgv: ['--expose-gc'] });
    // Only those names: a longer flag that starts the same is kept.
    expect(inheritedStartOptions(['--import-meta-resolve', '--require-module', '-r', 'x'], {})).toEqual({
      execArgv: ['--import-meta-resolve', '--require-module'],
    });
  });

  it('leaves them out of NODE_OPTIONS too, keeping the rest and its quoting', () => {
    const env = { NODE_OPTIONS: '--enable-source-maps --input-type=module --import "./my dir/tracing.mjs" --title "a \\"b\\""', HOME: '/home/dev' };
    const inherited = inheritedStartOptions([], env);
    expect(inherited).toEqual({ env: { NODE_OPTIONS: '--enable-source-maps --title "a \\"b\\""', HOME: '/home/dev' } });
    expect(splitNodeOptions(inherited.env!.NODE_OPTIONS!)).toEqual(['--enable-source-maps', '--title', 'a "b"']);
  });
});

describe('splitNodeOptions', () => {
  it('splits on spaces, except inside double quotes, where a backslash escapes', () => {
    expect(splitNodeOptions('  -r  ./a.js   --x=1 ')).toEqual(['-r', './a.js', '--x=1']);
    expect(splitNodeOptions('--require "./my dir/a.js" --y="q \\" \\\\ z" ""')).toEqual(['--require', './my dir/a.js', '--y=q " \\ z', '']);
    expect(splitNodeOptions('')).toEqual([]);
  });
});
