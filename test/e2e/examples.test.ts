/**
 * The TypeScript examples as the README runs them: compiled with esbuild (`--keep-names`, into
 * `examples/out/`, where `callbridge` resolves to this package by its name), then run with node
 * against a real local server; the calls they leave are checked by name and shape. `npm test`
 * typechecks the examples too, but only running them shows what a user gets.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type CallbridgeClient } from '../../src/client/index.js';
import type { Call } from '../../src/wire/calls.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { cleanEnv, ensureBuilt, ROOT, runNode } from './node-process.js';

// A folder of its own inside examples/out (gitignored): a user's own compiled examples stay.
const OUT = join(ROOT, 'examples/out/e2e-test');
const EXAMPLES = ['wrap-functions', 'existing-otel-setup', 'hosted-service'] as const;

let server: TestServer;
let client: CallbridgeClient;

beforeAll(async () => {
  ensureBuilt();
  // The README's command: npx esbuild <file> --format=esm --platform=node --target=node20 --keep-names
  await build({
    entryPoints: EXAMPLES.map((name) => join(ROOT, `examples/${name}.ts`)),
    format: 'esm',
    platform: 'node',
    target: 'node20',
    keepNames: true,
    outdir: OUT,
    logLevel: 'silent',
  });
  server = await startTestServer({ users: [{ username: 'api', password: 'example-key', entities: ['*'] }] });
  client = createClient({ baseUrl: server.url, username: server.username, password: server.password });
}, 60_000);

afterAll(async () => {
  await client?.close();
  await server?.close();
  await rm(OUT, { recursive: true, force: true });
});

/** Runs one compiled example with `env` on top of the test server's address; its calls, oldest first. */
async function runExample(name: (typeof EXAMPLES)[number], project: string, env: Record<string, string>): Promise<{ stdout: string; calls: Call[] }> {
  const run = await runNode([join(OUT, `${name}.js`)], {
    env: cleanEnv({ CALLBRIDGE_PROJECT: project, ...env }),
    timeoutMs: 30_000,
  });
  expect(run.timedOut).toBe(false);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return { stdout: run.stdout, calls: await client.callsQuery({ project_id: project }) };
}

const nameOf = (call: Call): string => call.op_name;

describe('the TypeScript examples, compiled and run as the README says', () => {
  it('wrap-functions: trace(), @traced() methods, streams reduced, a thread of two turns', async () => {
    const { stdout, calls } = await runExample('wrap-functions', 'acme/recipes', {
      CALLBRIDGE_BASE_URL: server.url,
      CALLBRIDGE_USERNAME: server.username,
      CALLBRIDGE_PASSWORD: server.password,
    });
    expect(stdout).toContain('Try the Tomato soup: ready in 30 minutes.');
    expect(calls.map(nameOf).sort()).toEqual(['chef.rate', 'searchRecipes', 'streamAdvice', 'streamRecipeCard', 'suggest']);
    const byName = new Map(calls.map((call) => [call.op_name, call]));
    expect(byName.get('searchRecipes')).toMatchObject({ inputs: { query: 'tomato' } });
    expect(byName.get('streamAdvice')!.output).toBe('Try the Tomato soup: ready in 30 minutes.');
    expect(byName.get('streamRecipeCard')!.output).toBe('Green salad: 10 minutes, serves two.');
    expect(byName.get('chef.rate')).toMatchObject({ display_name: 'Rate a dish', output: { dish: 'Tomato soup', stars: 5 } });
    expect(byName.get('suggest')!.attributes).toMatchObject({ kitchen: 'home', kind: 'agent' });
    const turns = calls.filter((call) => call.turn_id !== null);
    expect(turns.map(nameOf).sort()).toEqual(['chef.rate', 'suggest']);
    expect(new Set(turns.map((call) => call.thread_id))).toEqual(new Set(['dinner-42']));
  });

  it('existing-otel-setup: a span of the plain OTel API with a trace() call under it', async () => {
    const { calls } = await runExample('existing-otel-setup', 'acme/shop', {
      CALLBRIDGE_BASE_URL: server.url,
      CALLBRIDGE_USERNAME: server.username,
      CALLBRIDGE_PASSWORD: server.password,
    });
    expect(calls.map(nameOf).sort()).toEqual(['checkout', 'priceCart']);
    const checkout = calls.find((call) => call.op_name === 'checkout')!;
    const priceCart = calls.find((call) => call.op_name === 'priceCart')!;
    expect(priceCart.parent_id).toBe(checkout.id);
    expect(priceCart.output).toBe(13);
  });

  it('hosted-service: an API key sent as user api, read back with the client', async () => {
    const { stdout, calls } = await runExample('hosted-service', 'acme/hosted', {
      WF_TRACE_SERVER_URL: server.url,
      WANDB_API_KEY: 'example-key',
    });
    expect(calls.map(nameOf)).toEqual(['summarize']);
    expect(stdout).toContain('latest: summarize (success)');
  });
});
