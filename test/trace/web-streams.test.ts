/**
 * trace() around functions that return a web ReadableStream: the call stays open until the
 * stream is read to its end, cancelled or errors, whichever way it is read (reader, for await,
 * pipes, tee, a Response, Readable.fromWeb), and the caller gets the very same stream back.
 */
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SpanStatusCode } from '@opentelemetry/api';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { trace } from '../../src/trace/index.js';
import { installProvider, jsonAttribute, parentOf } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

const child = trace(function child(n: number) {
  return n;
});

/** A stream of `words`, one per pull, that counts its pulls and records a cancel's reason. */
function wordStream(words: string[]) {
  const state = { pulls: 0, cancelReason: undefined as unknown };
  let index = 0;
  const stream = new ReadableStream<string>(
    {
      pull(controller) {
        state.pulls++;
        child(index);
        if (index < words.length) controller.enqueue(words[index++]!);
        else controller.close();
      },
      cancel(reason) {
        state.cancelReason = reason;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, state };
}

const answer = ['Hello', ', ', 'world'];
let made: ReturnType<typeof wordStream>;
const streamAnswer = trace(function streamAnswer(prompt: string) {
  made = wordStream(prompt === 'short' ? ['Hi'] : answer);
  return made.stream;
});
const isOpen = (name: string) => !tracing.spans().some((span) => span.name === name);

describe('web ReadableStream results', () => {
  it('returns the same stream; the call ends when a reader reaches the end, output the chunks', async () => {
    const stream = streamAnswer('hi');
    expect(stream).toBe(made.stream);
    expect(stream).toBeInstanceOf(ReadableStream);
    const reader = stream.getReader();
    expect(stream.locked).toBe(true);
    const seen: string[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      seen.push(value);
      expect(isOpen('streamAnswer')).toBe(true);
    }
    expect(seen).toEqual(answer);
    const span = tracing.span('streamAnswer');
    expect(jsonAttribute(span, 'output')).toEqual(answer);
    expect(jsonAttribute(span, 'inputs')).toEqual({ prompt: 'hi' });
    expect(span.attributes['callbridge.stream.end']).toBeUndefined();
    reader.releaseLock();
    expect(stream.locked).toBe(false);
  });

  it('never reads ahead of the consumer', async () => {
    const reader = streamAnswer('hi').getReader();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(made.state.pulls).toBe(0);
    await reader.read();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(made.state.pulls).toBe(1);
    await reader.cancel();
  });

  it('runs the stream source in the call context: spans it starts are children of the call', async () => {
    await text(streamAnswer('hi'));
    const parentId = tracing.span('streamAnswer').spanContext().spanId;
    const children = tracing.spans().filter((span) => span.name === 'child');
    expect(children).toHaveLength(answer.length + 1);
    for (const span of children) expect(parentOf(span)).toBe(parentId);
  });

  it('is observed through for await, pipeThrough, pipeTo, tee, Response and Readable.fromWeb', async () => {
    const seen: string[] = [];
    for await (const chunk of streamAnswer('hi')) seen.push(chunk);
    expect(seen).toEqual(answer);

    const encoded = streamAnswer('hi').pipeThrough(new TextEncoderStream()).pipeThrough(new TextDecoderStream());
    expect(await text(encoded)).toBe('Hello, world');

    const written: string[] = [];
    await streamAnswer('hi').pipeTo(new WritableStream({ write: (chunk) => void written.push(chunk) }));
    expect(written).toEqual(answer);

    const [left, right] = streamAnswer('hi').tee();
    expect(await Promise.all([text(left), text(right)])).toEqual(['Hello, world', 'Hello, world']);

    expect(await new Response(streamAnswer('hi').pipeThrough(new TextEncoderStream())).text()).toBe('Hello, world');
    const upload = trace(function upload() {
      return new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('Hi'));
          controller.close();
        },
      });
    });
    expect(await new Response(upload()).text()).toBe('Hi');

    expect(await text(Readable.fromWeb(streamAnswer('hi') as import('node:stream/web').ReadableStream))).toBe('Hello, world');

    const outputs = tracing.spans().filter((span) => span.name === 'streamAnswer').map((span) => jsonAttribute(span, 'output'));
    expect(outputs).toEqual(Array.from({ length: 6 }, () => answer));
    expect(jsonAttribute(tracing.span('upload'), 'output')).toEqual([Buffer.from('Hi').toString('base64')]);
  });

  it('builds the output with reduce', async () => {
    const joined = trace(() => wordStream(answer).stream, { name: 'joined', reduce: (chunks) => chunks.join('') });
    await text(joined());
    expect(tracing.span('joined').attributes.output).toBe('Hello, world');
  });

  it('ends as cancelled when the reader cancels, and cancels the source with the same reason', async () => {
    const reader = streamAnswer('hi').getReader();
    await reader.read();
    await reader.cancel('user left');
    expect(made.state.cancelReason).toBe('user left');
    const span = tracing.span('streamAnswer');
    expect(span.attributes['callbridge.stream.end']).toBe('cancelled');
    expect(jsonAttribute(span, 'output')).toEqual(['Hello']);
  });

  it('ends as cancelled when for await breaks off, and cancels the source', async () => {
    for await (const chunk of streamAnswer('hi')) if (chunk === ', ') break;
    expect(made.state.cancelReason).toBeUndefined();
    expect(made.state.pulls).toBe(2);
    const span = tracing.span('streamAnswer');
    expect(span.attributes['callbridge.stream.end']).toBe('cancelled');
    expect(jsonAttribute(span, 'output')).toEqual(['Hello', ', ']);
  });

  it('ends as abandoned when the stream is garbage collected unread', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    (() => void streamAnswer('hi'))();
    made = undefined as unknown as ReturnType<typeof wordStream>;
    for (let i = 0; i < 10 && isOpen('streamAnswer'); i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(tracing.span('streamAnswer').attributes['callbridge.stream.end']).toBe('abandoned');
  });

  it('ends as cancelled when the stream is cancelled unread', async () => {
    const stream = streamAnswer('hi');
    await stream.cancel('not needed');
    expect(made.state.cancelReason).toBe('not needed');
    expect(tracing.span('streamAnswer').attributes['callbridge.stream.end']).toBe('cancelled');
  });

  it('keeps the rules of a locked stream', async () => {
    const stream = streamAnswer('hi');
    const reader = stream.getReader();
    expect(() => stream.getReader()).toThrow(TypeError);
    await expect(stream.cancel()).rejects.toThrow(TypeError);
    await reader.cancel();
  });

  it('records the source error and hands the consumer the same error', async () => {
    const failure = new Error('model overloaded');
    const failing = trace(function failing() {
      let sent = false;
      return new ReadableStream<string>({
        pull(controller) {
          if (sent) controller.error(failure);
          else controller.enqueue('partial');
          sent = true;
        },
      });
    });
    const reader = failing().getReader();
    expect(await reader.read()).toEqual({ done: false, value: 'partial' });
    await expect(reader.read()).rejects.toBe(failure);
    const span = tracing.span('failing');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'model overloaded' });
    expect(span.events.map((event) => event.name)).toEqual(['exception']);
    // What arrived before the error is the failed call's output.
    expect(jsonAttribute(span, 'output')).toEqual(['partial']);
  });

  it('observes a subclass whose own methods read through getReader (LangChain, AI SDK style)', async () => {
    class IterableStream<T> extends ReadableStream<T> {
      #reader: ReadableStreamDefaultReader<T> | undefined;
      async next(): Promise<IteratorResult<T>> {
        this.#reader ??= this.getReader();
        const { done, value } = await this.#reader.read();
        return done ? { done: true, value: undefined } : { done: false, value };
      }
      override [Symbol.asyncIterator](): AsyncIterableIterator<T> {
        return this as unknown as AsyncIterableIterator<T>;
      }
    }
    const sdkCall = trace(function sdkCall() {
      const chunks = ['a', 'b'];
      return new IterableStream<string>({
        pull: (controller) => (chunks.length > 0 ? controller.enqueue(chunks.shift()!) : controller.close()),
      });
    });
    const stream = sdkCall();
    expect(stream).toBeInstanceOf(IterableStream);
    const seen: string[] = [];
    for await (const chunk of stream) seen.push(chunk);
    expect(seen).toEqual(['a', 'b']);
    expect(jsonAttribute(tracing.span('sdkCall'), 'output')).toEqual(['a', 'b']);
  });

  it('keeps a byte stream a byte stream: BYOB readers and byte tee() work, and are observed', async () => {
    const bytesOut = trace(function bytesOut() {
      let sent = 0;
      return new ReadableStream({
        type: 'bytes',
        pull(controller) {
          if (sent++ < 2) controller.enqueue(new Uint8Array([sent, sent, sent]));
          else controller.close();
        },
      });
    });
    const reader = bytesOut().getReader({ mode: 'byob' });
    const first = await reader.read(new Uint8Array(2));
    expect([...first.value!]).toEqual([1, 1]);
    const second = await reader.read(new Uint8Array(8));
    expect([...second.value!]).toEqual([1]);
    const third = await reader.read(new Uint8Array(8));
    expect([...third.value!]).toEqual([2, 2, 2]);
    const last = await reader.read(new Uint8Array(8));
    expect(last.done).toBe(true);
    const base64 = (bytes: number[]) => Buffer.from(bytes).toString('base64');
    expect(jsonAttribute(tracing.span('bytesOut'), 'output')).toEqual([base64([1, 1, 1]), base64([2, 2, 2])]);

    const [left, right] = bytesOut().tee();
    const leftReader = left.getReader({ mode: 'byob' });
    const leftChunk = await leftReader.read(new Uint8Array(8));
    const rightReader = right.getReader();
    const rightChunk = await rightReader.read();
    expect([...leftChunk.value!]).toEqual([1, 1, 1]);
    expect(rightChunk.value).not.toBe(leftChunk.value);
    expect([...(rightChunk.value as Uint8Array)]).toEqual([1, 1, 1]);
    await Promise.all([leftReader.cancel(), rightReader.cancel()]);
  });

  it("passes on the source's close at once: reader.closed settles after the last chunk, and the call ends", async () => {
    const closing = trace(function closing() {
      return new ReadableStream<string>({
        start(controller) {
          controller.enqueue('only');
          controller.close();
        },
      });
    });
    const reader = closing().getReader();
    expect(await reader.read()).toEqual({ done: false, value: 'only' });
    await reader.closed;
    expect(jsonAttribute(tracing.span('closing'), 'output')).toEqual(['only']);
  });

  it("passes on the source's error while no read is pending: reader.closed rejects with it, the call fails", async () => {
    const failure = new Error('connection reset');
    let fail!: (error: unknown) => void;
    const idle = trace(function idle() {
      return new ReadableStream<string>({
        start(controller) {
          controller.enqueue('first');
          fail = (error) => controller.error(error);
        },
      });
    });
    const reader = idle().getReader();
    await reader.read();
    fail(failure);
    await expect(reader.closed).rejects.toBe(failure);
    expect(tracing.span('idle').status).toEqual({ code: SpanStatusCode.ERROR, message: 'connection reset' });
  });

  it('records a cancel of a stream that had failed as the failure, and rejects it with the same error', async () => {
    const failure = new Error('upstream gone');
    const failed = trace(function failed() {
      return new ReadableStream<string>({ start: (controller) => controller.error(failure) });
    });
    const stream = failed();
    await expect(stream.cancel('bye')).rejects.toBe(failure);
    const span = tracing.span('failed');
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes['callbridge.stream.end']).toBeUndefined();
  });

  it('observes a default reader taken after a BYOB attempt failed (feature detection)', async () => {
    const stream = streamAnswer('hi');
    expect(() => stream.getReader({ mode: 'byob' })).toThrow(TypeError);
    expect(await text(stream)).toBe('Hello, world');
    expect(jsonAttribute(tracing.span('streamAnswer'), 'output')).toEqual(answer);
  });

  it('keeps text and bytes up to maxValueBytes, counts the rest, and keeps nothing when the output is not captured', async () => {
    const chunk = 'x'.repeat(1000);
    const long = (name: string, options: Parameters<typeof trace>[1]) =>
      trace(() => new ReadableStream<string>({ pull: (controller) => controller.enqueue(chunk) }), { name, ...options });
    const readChunks = async (stream: ReadableStream<string>, count: number) => {
      const reader = stream.getReader();
      for (let i = 0; i < count; i++) await reader.read();
      await reader.cancel();
    };
    await readChunks(long('bounded', { maxValueBytes: 4096 })(), 50);
    const output = jsonAttribute(tracing.span('bounded'), 'output') as string[];
    expect(output).toHaveLength(6);
    expect(output.at(-1)).toBe('[45 more chunks]');
    await readChunks(long('uncaptured', { captureOutput: false })(), 5);
    expect(tracing.span('uncaptured').attributes.output).toBeUndefined();
  });

  it("leaves a subclass's own locked getter alone", async () => {
    class Custom extends ReadableStream<string> {
      override get locked(): boolean {
        return super.locked;
      }
    }
    const custom = trace(function custom() {
      return new Custom({ start: (controller) => controller.close() });
    });
    const stream = custom();
    expect(Object.getOwnPropertyDescriptor(stream, 'locked')).toBeUndefined();
    await text(stream);
    expect(jsonAttribute(tracing.span('custom'), 'output')).toEqual([]);
  });

  it('patches nothing when one of the methods cannot be replaced, and ends the call as unobservable', async () => {
    const fixed = trace(function fixed() {
      const stream = wordStream(['a']).stream;
      Object.defineProperty(stream, 'cancel', { value: ReadableStream.prototype.cancel, configurable: false });
      return stream;
    });
    const stream = fixed();
    expect(Object.getOwnPropertyDescriptor(stream, 'getReader')).toBeUndefined();
    expect(tracing.span('fixed').attributes.output).toBe('[unobservable stream]');
    expect(await text(stream)).toBe('a');
  });

  it('ends a frozen stream at once as unobservable, and the stream still reads', async () => {
    const frozen = trace(function frozen() {
      return Object.freeze(wordStream(['x']).stream);
    });
    const stream = frozen();
    expect(tracing.span('frozen').attributes.output).toBe('[unobservable stream]');
    expect(await text(stream)).toBe('x');
  });

  it('keeps byte chunks as the capture writes them (base64)', async () => {
    const body = trace(function body() {
      return new Response('abc').body!;
    });
    expect(await text(body())).toBe('abc');
    expect(jsonAttribute(tracing.span('body'), 'output')).toEqual([Buffer.from('abc').toString('base64')]);
  });
});
