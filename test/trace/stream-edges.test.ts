/**
 * Streams at their edges: an async iterable whose iterator holds no reference back to it, read
 * across garbage collections, and a thenable that is also async-iterable (a Mongoose Query).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { trace } from '../../src/trace/index.js';
import { installProvider, jsonAttribute } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * A hand-rolled streaming result: an object with extra members (`abort`) whose async iterator is
 * a generator made up front. Once `for await` has taken the iterator, nothing the consumer holds
 * references this object (unlike a generator method, whose generator keeps its `this`).
 */
function answerStream(chunks: string[]): AsyncIterable<string> & { abort(): void } {
  async function* produce(): AsyncGenerator<string> {
    for (const chunk of chunks) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      yield chunk;
    }
  }
  const generator = produce();
  return {
    abort: () => void generator.return(undefined),
    [Symbol.asyncIterator]: () => generator,
  };
}

describe('streams at their edges', () => {
  it('an async iterable being read with for await is not ended as abandoned when GC runs mid-stream', async () => {
    const chat = trace(async function chat(prompt: string) {
      await Promise.resolve();
      return answerStream([`${prompt}-1`, `${prompt}-2`, `${prompt}-3`, `${prompt}-4`]);
    });
    const seen: string[] = [];
    for await (const chunk of await chat('hi')) {
      seen.push(chunk);
      await collectGarbage(); // a long model stream sees many GCs
    }
    expect(seen).toEqual(['hi-1', 'hi-2', 'hi-3', 'hi-4']);
    const span = tracing.span('chat');
    // Not ended at the first GC as "abandoned", with output ["hi-1"].
    expect(span.attributes['callbridge.stream.end']).toBeUndefined();
    expect(jsonAttribute(span, 'output')).toEqual(['hi-1', 'hi-2', 'hi-3', 'hi-4']);
  });

  it('a thenable that is also async-iterable (a Mongoose Query) ends its call when iterated to the end', async () => {
    // Mongoose's Query has both `then` and `[Symbol.asyncIterator]`: `for await (const doc of Model.find())`.
    class Query {
      constructor(private readonly docs: string[]) {}
      then<T>(onFulfilled: (docs: string[]) => T, onRejected?: (reason: unknown) => T): Promise<T> {
        return Promise.resolve(this.docs).then(onFulfilled, onRejected);
      }
      async *[Symbol.asyncIterator](): AsyncGenerator<string> {
        for (const doc of this.docs) yield doc;
      }
    }
    const findUsers = trace(function findUsers() {
      return new Query(['ann', 'bob']);
    });
    const query = findUsers();
    const seen: string[] = [];
    for await (const doc of query as unknown as AsyncIterable<string>) seen.push(doc);
    expect(seen).toEqual(['ann', 'bob']);
    // Ended when the iteration ends, not left open until the query object is collected.
    expect(tracing.spans().map((span) => span.name)).toEqual(['findUsers']);
    expect(jsonAttribute(tracing.span('findUsers'), 'output')).toEqual(['ann', 'bob']);
  });
});
