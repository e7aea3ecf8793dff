/**
 * The reach of `endOpenCalls()` at a `register()`'s shutdown. Shutting down one tracing must
 * not end the traced streams of another that still runs (they are not its spans).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../../src/exporter/register.js';
import { trace } from '../../src/trace/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

function options(project: string) {
  return { baseUrl: server.url, projectId: project, username: server.username, password: server.password, deliveryThread: 'main' as const, flushOnExit: false };
}

describe('register() shutdown and traced streams of another tracing', () => {
  it.each([
    ['a register({ global: false }) beside it', { global: false } as { global?: boolean }],
    ['a second register() that could not take the globals', {} as { global?: boolean }],
  ])('shutting down %s leaves the global tracing\'s open streams alone', async (_what, second) => {
    const project = `acme/lifecycle-streams-${second.global === false ? 'local' : 'second'}`;
    const main = register(options(project));
    const other = register({ ...options('acme/lifecycle-streams-other'), ...second });
    try {
      const words = trace(async function* words() {
        yield 'first';
        yield 'second';
      });
      const stream = words();
      await stream.next();
      await other.shutdown();
      // The stream goes on: its call must end when it is read to its end, with every chunk.
      const rest: string[] = [];
      for await (const chunk of { [Symbol.asyncIterator]: () => stream }) rest.push(chunk);
      expect(rest).toEqual(['second']);
      await main.forceFlush();
      const calls = await readAllCalls(server.url, project, server);
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({ op_name: 'words', output: ['first', 'second'] });
      expect((calls[0]!.attributes as Record<string, unknown>).callbridge).toBeUndefined();
    } finally {
      await other.shutdown();
      await main.shutdown();
    }
  });
});
