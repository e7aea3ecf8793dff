import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, Readable, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { CapturePolicy } from '../../src/trace/capture.js';
import { capture, captureText, DEFAULT_MAX_VALUE_BYTES, MAX_CAPTURED_ITEMS } from '../../src/trace/capture.js';
import { compileRedactor, isSecretKey, REDACTED } from '../../src/trace/redact.js';

const policy = (overrides: Partial<CapturePolicy> = {}): CapturePolicy => ({
  maxValueBytes: DEFAULT_MAX_VALUE_BYTES,
  redactor: compileRedactor(undefined),
  ...overrides,
});
const copy = (value: unknown, over?: Partial<CapturePolicy>) => capture(value, policy(over)).value;

describe('capture: values that are not JSON', () => {
  it('marks cycles but copies shared references', () => {
    const shared = { n: 1 };
    const root: Record<string, unknown> = { a: shared, b: shared };
    root.self = root;
    const list: unknown[] = [1];
    list.push(list);
    expect(copy(root)).toEqual({ a: { n: 1 }, b: { n: 1 }, self: '[Circular]' });
    expect(copy(list)).toEqual([1, '[Circular]']);
  });

  it('survives getters that throw and hostile proxies', () => {
    const value = {
      ok: 1,
      get broken(): number {
        throw new Error('no access');
      },
    };
    expect(copy(value)).toEqual({ ok: 1, broken: '[Getter threw: no access]' });
    const hostile = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('trap');
        },
      },
    );
    expect(copy({ hostile })).toEqual({ hostile: '[Unreadable: trap]' });
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(copy([proxy])).toEqual([expect.stringMatching(/^\[Unreadable/)]);
  });

  it('copies class instances by their own enumerable properties', () => {
    class Point {
      #hidden = 1;
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
      get sum() {
        return this.x + this.y + this.#hidden;
      }
    }
    expect(copy(new Point(1, 2))).toEqual({ x: 1, y: 2 });
  });

  it('honours toJSON, and marks one that throws', () => {
    expect(copy({ when: { toJSON: () => 'custom' } })).toEqual({ when: 'custom' });
    const bad = {
      toJSON() {
        throw new Error('bad json');
      },
    };
    expect(copy({ bad })).toEqual({ bad: '[toJSON threw: bad json]' });
    const selfish = { a: 1, toJSON() {
      return this;
    } };
    expect(copy(selfish)).toEqual({ a: 1, toJSON: '[Function toJSON]' });
  });

  it('reads only the items it keeps of a typed array, a Set or a Map, and counts the rest', () => {
    const items = MAX_CAPTURED_ITEMS;
    const floats = copy(new Float32Array(items + 5).fill(0.5)) as unknown[];
    expect(floats).toHaveLength(items + 1);
    expect(floats.at(-1)).toBe('[5 more items]');
    const set = copy(new Set(Array.from({ length: items + 3 }, (_, i) => i))) as unknown[];
    expect(set.at(-1)).toBe('[3 more items]');

    // A Map whose iteration is counted: the entries past what is kept are never read.
    let read = 0;
    class CountingMap<K, V> extends Map<K, V> {
      override *[Symbol.iterator](): MapIterator<[K, V]> {
        for (const entry of super[Symbol.iterator]()) {
          read++;
          yield entry;
        }
      }
    }
    const big = new CountingMap(Array.from({ length: items + 7 }, (_, i) => [`k${i}`, i] as [string, number]));
    const mapped = copy(big) as Record<string, unknown>;
    expect(mapped['…']).toBe('[7 more keys]'); // the key a cut object's marker goes under
    expect(read).toBe(items);
  });

  it('writes Maps, Sets, Dates, RegExps and boxed primitives readably', () => {
    expect(copy(new Map([['a', 1], ['b', 2]]))).toEqual({ a: 1, b: 2 });
    expect(copy(new Map<unknown, number>([[{ k: 1 }, 1], [2, 2]]))).toEqual([[{ k: 1 }, 1], [2, 2]]);
    expect(copy(new Set([1, 'x']))).toEqual([1, 'x']);
    expect(copy(new Date('2026-01-02T03:04:05.678Z'))).toBe('2026-01-02T03:04:05.678Z');
    expect(copy(new Date(Number.NaN))).toBe('Invalid Date');
    expect(copy(/ab+c/gi)).toBe('/ab+c/gi');
    expect(copy([new Number(3), new String('s'), new Boolean(false)])).toEqual([3, 's', false]);
  });

  it('writes bytes as base64 and big binaries as a summary', () => {
    expect(copy(Buffer.from('hello'))).toBe('aGVsbG8=');
    expect(copy(new Uint8Array([1, 2, 3]))).toBe('AQID');
    expect(copy(new Uint8Array([0, 1, 2, 3]).subarray(1, 3))).toBe('AQI=');
    expect(copy(new Uint8Array([104, 105]).buffer)).toBe('aGk=');
    expect(copy(Buffer.alloc(4096), { maxValueBytes: 1024 })).toBe('[Buffer 4096 bytes]');
    expect(copy(new Float32Array([0.5, 1.5]))).toEqual([0.5, 1.5]);
    expect(copy(new BigInt64Array([5n]))).toEqual(['5']);
    expect(copy(new DataView(new ArrayBuffer(8)))).toBe('[DataView 8 bytes]');
  });

  it('writes bigint, non-finite numbers, functions, symbols, promises', () => {
    expect(
      copy({
        big: 12345678901234567890n,
        nan: Number.NaN,
        inf: -Infinity,
        negZero: -0,
        fn: function helper() {},
        arrow: (() => () => 1)(),
        sym: Symbol('tag'),
        promise: Promise.resolve(1),
        weak: new WeakMap(),
        gone: undefined,
      }),
    ).toEqual({
      big: '12345678901234567890',
      nan: 'NaN',
      inf: '-Infinity',
      negZero: 0,
      fn: '[Function helper]',
      arrow: '[Function anonymous]',
      sym: 'Symbol(tag)',
      promise: '[Promise]',
      weak: '[WeakMap]',
    });
    expect(copy([undefined, () => 1])).toEqual([null, '[Function anonymous]']);
  });

  it('writes Node streams by their class name, never their internal state, buffered data or raw headers', async () => {
    const secret = Buffer.from('buffered file contents');
    const readable = new Readable({ read() {} });
    readable.push(secret);
    expect(
      copy({
        readable,
        writable: new Writable({ write: (_chunk, _encoding, done) => done() }),
        duplex: new PassThrough(),
        web: new ReadableStream(),
        sink: new WritableStream(),
        transform: new TransformStream(),
      }),
    ).toEqual({
      readable: '[Readable]',
      writable: '[Writable]',
      duplex: '[PassThrough]',
      web: '[ReadableStream]',
      sink: '[WritableStream]',
      transform: '[TransformStream]',
    });
    expect(capture(readable, policy()).json).not.toContain(secret.toString('base64'));
    // Something with a pipe method of its own that is not a Node stream is copied as usual.
    expect(copy(new (class Plumbing { pipe() {} tool = 'wrench'; })())).toEqual({ tool: 'wrench' });

    // An HTTP handler's (req, res), and a client request with a body written: their raw header
    // text and buffered body sit in properties no key-based redaction sees.
    const server = createServer((request, response) => {
      response.setHeader('set-cookie', 'session=SESSION-SECRET');
      const seen = capture({ request, response }, policy()).json;
      response.end(seen);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const outgoing = httpRequest({ port, method: 'POST', headers: { authorization: 'Bearer SECRET-XYZ' } });
      outgoing.write('password=hunter2');
      expect(capture(outgoing, policy()).json).toBe('"[ClientRequest]"');
      const answer = await new Promise<string>((resolve, reject) => {
        outgoing.on('response', (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => resolve(text));
        });
        outgoing.on('error', reject);
        outgoing.end();
      });
      expect(JSON.parse(answer)).toEqual({ request: '[IncomingMessage]', response: '[ServerResponse]' });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("writes fetch's Headers, Request and Response by what they say, headers redacted, bodies untouched", async () => {
    const headers = new Headers({ 'content-type': 'application/json', authorization: 'Bearer sk-123' });
    const request = new Request('https://api.example/v1/chat', { method: 'POST', headers, body: '{"q":1}' });
    const response = new Response('{"answer":42}', { status: 201, statusText: 'Created', headers: { 'set-cookie': 'session=abc' } });
    expect(copy({ headers, request, response })).toEqual({
      headers: { authorization: REDACTED, 'content-type': 'application/json' },
      request: { method: 'POST', url: 'https://api.example/v1/chat', headers: { authorization: REDACTED, 'content-type': 'application/json' } },
      response: { status: 201, statusText: 'Created', url: '', headers: { 'content-type': 'text/plain;charset=UTF-8', 'set-cookie': REDACTED } },
    });
    expect(response.bodyUsed).toBe(false);
    // The undici package's own classes (not Node's globals) are read the same way.
    const undici = await import('undici');
    const packaged = new undici.Response('{}', { status: 404, headers: { 'x-request-id': 'r1' } });
    expect(copy(packaged)).toEqual({ status: 404, statusText: '', url: '', headers: { 'content-type': 'text/plain;charset=UTF-8', 'x-request-id': 'r1' } });
    expect(copy(new undici.Headers({ cookie: 'a=b' }))).toEqual({ cookie: REDACTED });
    // A look-alike whose getters throw is unreadable, and capture still does not throw.
    class LookAlike {
      get [Symbol.toStringTag](): string {
        return 'Response';
      }
      get status(): number {
        throw new Error('not a real response');
      }
    }
    expect(copy({ fake: new LookAlike() })).toEqual({ fake: '[LookAlike]' });
    // A test double that only carries the tag is copied by its own fields, as before.
    class MockResponse {
      status = 200;
      headers = { 'x-mock': 'yes' };
      get [Symbol.toStringTag](): string {
        return 'Response';
      }
    }
    expect(copy(new MockResponse())).toEqual({ status: 200, headers: { 'x-mock': 'yes' } });
    // Headers that never end are read up to the item cap, not for ever.
    class EndlessHeaders {
      get [Symbol.toStringTag](): string {
        return 'Headers';
      }
      *[Symbol.iterator](): Generator<[string, string]> {
        for (let i = 0; ; i++) yield [`h${i}`, 'v'];
      }
    }
    const endless = copy(new EndlessHeaders(), { maxValueBytes: 1 << 30 }) as Record<string, unknown>;
    expect(Object.keys(endless).length).toBeLessThanOrEqual(10_001);
    expect(copy(new Headers([['__proto__', 'odd']]))).toEqual({ ['__proto__']: 'odd' });
    // Properties someone added to one are kept beside what it says.
    expect(copy(Object.assign(new Response('x', { status: 202 }), { meta: { attempt: 2 } }))).toMatchObject({ status: 202, meta: { attempt: 2 } });
    expect(await response.json()).toEqual({ answer: 42 });
    expect(await request.text()).toBe('{"q":1}');
  });

  it('writes a class instance with no own properties by its class name', () => {
    class Session {
      readonly #token = 'secret';
      get token(): string {
        return this.#token;
      }
    }
    expect(copy({ session: new Session(), controller: new AbortController(), plain: {}, bare: Object.create(null) })).toEqual({
      session: '[Session]',
      controller: '[AbortController]',
      plain: {},
      bare: {},
    });
  });

  it('writes errors with name, message, stack, cause and own properties', () => {
    const error = Object.assign(new RangeError('out', { cause: new Error('root') }), { code: 'E_OUT' });
    const copied = copy(error) as Record<string, unknown>;
    expect(copied).toMatchObject({ name: 'RangeError', message: 'out', code: 'E_OUT', cause: { name: 'Error', message: 'root' } });
    expect(String(copied.stack)).toContain('RangeError: out');
  });

  it("writes an AggregateError's errors (not enumerable), capped like any list", () => {
    const error = new AggregateError([new Error('first'), new TypeError('second'), 'plain'], 'all failed');
    const copied = copy(error) as Record<string, unknown>;
    expect(copied).toMatchObject({
      name: 'AggregateError',
      message: 'all failed',
      errors: [{ name: 'Error', message: 'first' }, { name: 'TypeError', message: 'second' }, 'plain'],
    });
    const many = copy(new AggregateError(Array.from({ length: MAX_CAPTURED_ITEMS + 5 }, (_, i) => i))) as { errors: unknown[] };
    expect(many.errors).toHaveLength(MAX_CAPTURED_ITEMS + 1);
    expect(many.errors.at(-1)).toBe('[5 more items]');
    // An `errors` someone set as an ordinary (enumerable) property is written once, as before.
    expect(copy(Object.assign(new Error('e'), { errors: ['x'] }))).toMatchObject({ errors: ['x'] });
  });

  it('never lets __proto__ keys change the prototype of the copy', () => {
    const parsed = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}');
    const copied = copy(parsed) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copied)).toBe(Object.prototype);
    expect(Object.keys(copied)).toEqual(['__proto__', 'a']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('produces JSON text that parses back to the copied value', () => {
    const { value, json } = capture({ a: [1, 'two', { three: 3n }] }, policy());
    expect(JSON.parse(json)).toEqual(value);
  });
});

describe('capture: size caps', () => {
  it('keeps JSON text within maxValueBytes with visible markers', () => {
    const max = 4096;
    const { json } = capture({ text: 'x'.repeat(100_000), list: Array.from({ length: 5000 }, (_, i) => i) }, policy({ maxValueBytes: max }));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(max);
    const parsed = JSON.parse(json) as { text: string; list: unknown[] };
    expect(parsed.text).toMatch(/…\[truncated \d+ chars\]$/);
    expect(parsed.list.at(-1)).toMatch(/^\[\d+ more items\]$/);
  });

  it('counts bytes, not characters, for multi-byte text', () => {
    const max = 1000;
    const { json } = capture({ text: '漢'.repeat(900) }, policy({ maxValueBytes: max }));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(max);
  });

  it('never splits a surrogate pair when cutting', () => {
    const { value } = capture('😀'.repeat(200), policy({ maxValueBytes: 100 }));
    expect(String(value)).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });

  it('caps depth and key counts', () => {
    let deep: Record<string, unknown> = { leaf: true };
    for (let i = 0; i < 100; i++) deep = { next: deep };
    expect(capture(deep, policy()).json).toContain('[Truncated: too deep]');
    const wide = Object.fromEntries(Array.from({ length: 12_000 }, (_, i) => [`k${i}`, i]));
    const copied = copy(wide) as Record<string, unknown>;
    expect(copied['…']).toBe('[2000 more keys]');
    expect((copy(new Float32Array(3072)) as unknown[]).length).toBe(3072);
  });

  it('falls back to a marker object when nothing else fits', () => {
    const wide = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`key-number-${i}`, i]));
    const { value, json } = capture(wide, policy({ maxValueBytes: 64 }));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(64);
    expect(JSON.parse(json)).toEqual(value);
  });

  it('runs user code once even when shrinking', () => {
    let reads = 0;
    const value = {
      get big() {
        reads++;
        return 'y'.repeat(50_000);
      },
    };
    capture(value, policy({ maxValueBytes: 512 }));
    expect(reads).toBe(1);
  });

  it('captureText cuts long strings to the byte budget', () => {
    expect(captureText('short', 100)).toBe('short');
    const cut = captureText('é'.repeat(10_000), 1000);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(1000);
    expect(cut).toMatch(/…\[truncated \d+ chars\]$/);
  });

  /** The kept prefix of a cut string, and the count its marker gives. */
  const cutParts = (text: string) => {
    const match = /^(.*)…\[truncated (\d+) chars\]$/su.exec(text);
    expect(match, text.slice(-60)).not.toBeNull();
    return { kept: match![1]!, removed: Number(match![2]) };
  };

  it('keeps nearly the whole budget of one long string, and counts every character cut from it', () => {
    const max = 256 * 1024;
    const long = 'a'.repeat(3_000_000);
    for (const text of [captureText(long, max), (JSON.parse(capture({ doc: long }, policy({ maxValueBytes: max })).json) as { doc: string }).doc]) {
      const { kept, removed } = cutParts(text);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(max);
      expect(kept.length).toBeGreaterThan(max * 0.9);
      expect(kept.length + removed).toBe(long.length);
    }
    const wide = captureText('é'.repeat(10_000), 1000);
    expect(Buffer.byteLength(wide)).toBeGreaterThan(900);
    const { kept, removed } = cutParts(wide);
    expect(kept.length + removed).toBe(10_000);
  });

  it('cuts many medium strings a little when together they are a little over, instead of giving up', () => {
    const max = 256 * 1024;
    const docs = Array.from({ length: 10 }, (_, i) => `${i}`.repeat(30_000));
    const { json } = capture({ question: 'q', docs }, policy({ maxValueBytes: max }));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(max);
    const kept = JSON.parse(json) as { question: string; docs: string[] };
    expect(kept.question).toBe('q');
    expect(kept.docs).toHaveLength(10);
    for (const doc of kept.docs) expect(cutParts(doc).kept.length).toBeGreaterThan(20_000);
    // A short multi-byte string just over a small budget is cut, not replaced by the fallback marker.
    const emoji = capture('😀'.repeat(27), policy({ maxValueBytes: 100 })).value;
    expect(String(emoji)).toMatch(/^(😀)+…\[truncated \d+ chars\]$/u);
  });

  it('stays bounded with many long strings: past a text budget each keeps a short prefix', () => {
    // 3000 references to one 200 KB string: 600 M characters if copied whole, past the longest
    // string V8 can make, so serialising the first copy used to fail the whole capture.
    const long = 'x'.repeat(200_000);
    const captured = capture(Array.from({ length: 3000 }, () => long), policy());
    expect(Array.isArray(captured.value)).toBe(true);
    expect(Buffer.byteLength(captured.json)).toBeLessThanOrEqual(DEFAULT_MAX_VALUE_BYTES);
    const items = captured.value as string[];
    expect(items[0]).toMatch(/^x+…\[truncated \d+ chars\]$/);
    // Under the budget nothing changes: two strings share the budget evenly, as before.
    const pair = capture([long, long], policy()).value as string[];
    expect(cutParts(pair[0]!).kept.length).toBe(cutParts(pair[1]!).kept.length);
  });

  it('counts from the original string when a later pass cuts it again', () => {
    // Two long strings and a long list: the passes cut the strings more than once.
    const value = { a: 'x'.repeat(50_000), b: '漢'.repeat(40_000), list: Array.from({ length: 5000 }, (_, i) => i) };
    const parsed = JSON.parse(capture(value, policy({ maxValueBytes: 8192 })).json) as { a: string; b: string };
    expect(cutParts(parsed.a).kept.length + cutParts(parsed.a).removed).toBe(50_000);
    expect(cutParts(parsed.b).kept.length + cutParts(parsed.b).removed).toBe(40_000);
  });
});

describe('capture: bounded work on shared references', () => {
  const REPEATED = '[Truncated: repeated reference]';
  const TOO_MANY = '[Truncated: too many values]';

  it('copies an object shared a few times in full wherever it is reached', () => {
    const config = { model: 'gpt-4o', headers: { 'x-team': 'ml' } };
    const message = { role: 'user', content: 'hi' };
    expect(copy({ first: config, second: config, messages: [message, message, message] })).toEqual({
      first: config,
      second: config,
      messages: [message, message, message],
    });
    // Two thousand records that share one object: well within what fits, so every copy is whole.
    const meta = { source: 'crm', tags: ['a', 'b'], owner: { name: 'ann' } };
    const records = Array.from({ length: 2000 }, (_, id) => ({ id, meta }));
    const { value, json } = capture(records, policy());
    expect(json).not.toContain('[Truncated');
    expect(value).toEqual(records);
  });

  it('bounds the work on a small graph whose objects list each other (friends)', () => {
    // Each person's `friends` getter returns the nine others: ~986 000 reads and seconds before.
    let reads = 0;
    interface Person {
      readonly id: number;
      readonly friends: Person[];
    }
    const people: Person[] = [];
    for (let id = 0; id < 10; id++) {
      const person: Person = {
        id,
        get friends() {
          reads++;
          return people.filter((other) => other !== person);
        },
      };
      people.push(person);
    }
    const { value, json } = capture({ person: people[0] }, policy());
    expect(reads).toBeLessThan(10_000);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(DEFAULT_MAX_VALUE_BYTES);
    expect(json).toContain(REPEATED);
    // Written depth first: the first friend whole, each other one whole or marked as copied before.
    type Copied = { id: number; friends: Array<Copied | string> };
    const person = (value as { person: Copied }).person;
    expect(person.id).toBe(0);
    expect(person.friends).toHaveLength(9);
    for (const [index, friend] of person.friends.entries()) {
      if (typeof friend === 'string') expect(friend).toBe(REPEATED);
      else expect(friend.id).toBe(index + 1);
    }
    expect((person.friends[0] as Copied).friends[0]).toBe('[Circular]');
  });

  it('bounds the work on a DAG whose every level references the next one twice', () => {
    // 21 objects, 2 097 150 getter reads before.
    let reads = 0;
    let node: object = { leaf: true };
    for (let level = 0; level < 20; level++) {
      const child = node;
      node = {
        get left() {
          reads++;
          return child;
        },
        get right() {
          reads++;
          return child;
        },
      };
    }
    const { json } = capture(node, policy());
    expect(reads).toBeLessThan(20_000);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(DEFAULT_MAX_VALUE_BYTES);
    expect(json).toContain(REPEATED);
    // The first path down is copied whole, to the leaf.
    expect(json.startsWith(`${'{"left":'.repeat(20)}{"leaf":true}`)).toBe(true);
  });

  it('bounds the work on a complete graph of plain objects', () => {
    // Twelve objects that each hold the eleven others: exhausted the heap before (the process died).
    let reads = 0;
    const nodes: Array<Record<string, unknown>> = [];
    for (let i = 0; i < 12; i++) {
      nodes.push(
        new Proxy({} as Record<string, unknown>, {
          get(target, key, receiver) {
            reads++;
            return Reflect.get(target, key, receiver);
          },
        }),
      );
    }
    for (const [i, node] of nodes.entries()) {
      for (const [j, other] of nodes.entries()) if (i !== j) node[`n${j}`] = other;
    }
    reads = 0;
    const { json } = capture(nodes[0], policy());
    expect(reads).toBeLessThan(100_000);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(DEFAULT_MAX_VALUE_BYTES);
    expect(json).toContain(REPEATED);
  });

  it('stops copying past a budget of values when getters make new objects all the way down', () => {
    // No object repeats: each read makes a new one, 2^18 of them (786 000 values).
    let reads = 0;
    const make = (level: number): object =>
      level === 18
        ? { leaf: true }
        : {
            get left() {
              reads++;
              return make(level + 1);
            },
            get right() {
              reads++;
              return make(level + 1);
            },
          };
    const { json } = capture(make(0), policy({ maxValueBytes: 4096 }));
    expect(reads).toBeLessThan(50_000);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(4096);
    expect(json).toContain(TOO_MANY);
  });

  it('counts bytes against the text budget: many references to one large Buffer stay bounded', () => {
    // 3000 x 150 KB as base64 was past the longest string V8 can make: the capture failed.
    const buffer = Buffer.alloc(150_000, 7);
    const { value, json } = capture(Array.from({ length: 3000 }, () => buffer), policy());
    expect(Array.isArray(value)).toBe(true);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(DEFAULT_MAX_VALUE_BYTES);
    expect(json).toContain('[Buffer 150000 bytes]');
  });
});

describe('capture: sizing down lists and objects', () => {
  const ints = (count: number) => Array.from({ length: count }, (_, i) => i);
  /** The items a cut list kept, and the count its marker gives. */
  const listParts = (list: unknown[]) => {
    const match = /^\[(\d+) more items\]$/.exec(String(list.at(-1)));
    expect(match, String(list.at(-1))).not.toBeNull();
    return { kept: list.slice(0, -1), removed: Number(match![1]) };
  };

  it.each([
    ['a list of 300 numbers', 1024, 300],
    ['a list of 2000 numbers', 4096, 2000],
    ['a list of 50 000 numbers (cut by the first copy, then again)', 1024, 50_000],
  ])('keeps the head of %s within the budget, and counts every item cut', (_name, max, count) => {
    const { value, json } = capture(ints(count), policy({ maxValueBytes: max }));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(max);
    const { kept, removed } = listParts(value as unknown[]);
    expect(kept).toEqual(ints(kept.length));
    expect(kept.length + removed).toBe(count);
    // Most of the budget is used: not halved again and again down to a few items.
    expect(Buffer.byteLength(json)).toBeGreaterThan(max * 0.7);
  });

  it('keeps every argument when one of them is a long list', () => {
    const { value, json } = capture({ label: 'short', values: ints(300) }, policy({ maxValueBytes: 1024 }));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(1024);
    const kept = value as { label: string; values: unknown[] };
    expect(kept.label).toBe('short');
    expect(listParts(kept.values).kept.length).toBeGreaterThan(200);
  });

  it('keeps a list of records and a list of lists (embeddings) as lists, cut at every level', () => {
    const records = Array.from({ length: 200 }, (_, i) => ({ id: i, name: `item${i}` }));
    const shortList = capture(records, policy({ maxValueBytes: 2048 }));
    expect(Buffer.byteLength(shortList.json)).toBeLessThanOrEqual(2048);
    const { kept, removed } = listParts(shortList.value as unknown[]);
    expect(kept).toEqual(records.slice(0, kept.length));
    expect(kept.length + removed).toBe(200);

    const embeddings = Array.from({ length: 200 }, (_, row) => Array.from({ length: 256 }, (_, i) => row + i / 1000));
    const { value, json } = capture(embeddings, policy());
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(DEFAULT_MAX_VALUE_BYTES);
    expect(Buffer.byteLength(json)).toBeGreaterThan(DEFAULT_MAX_VALUE_BYTES * 0.5);
    const rows = listParts(value as unknown[]);
    expect(rows.kept.length + rows.removed).toBe(200);
    for (const [index, row] of (rows.kept as unknown[][]).entries()) {
      const cells = listParts(row);
      expect(cells.kept).toEqual(embeddings[index]!.slice(0, cells.kept.length));
      expect(cells.kept.length + cells.removed).toBe(256);
    }
  });

  it('counts every key cut from a wide object, across passes', () => {
    const wide = Object.fromEntries(ints(12_000).map((i) => [`k${i}`, i]));
    const { value, json } = capture(wide, policy({ maxValueBytes: 2048 }));
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(2048);
    const kept = value as Record<string, unknown>;
    const marker = /^\[(\d+) more keys\]$/.exec(String(kept['…']));
    expect(marker).not.toBeNull();
    expect(Object.keys(kept).length - 1 + Number(marker![1])).toBe(12_000);
    expect(kept.k0).toBe(0);
  });
});

describe('redaction', () => {
  it('masks keys that look like secrets by default, and keeps look-alikes', () => {
    for (const key of ['api_key', 'apiKey', 'APIKey', 'apikey', 'OPENAI_API_KEY', 'x-api-key', 'password', 'new_password',
      'client_secret', 'secretKey', 'token', 'access_token', 'authToken', 'Authorization', 'proxy-authorization', 'cookie',
      'set-cookie', 'private_key', 'aws_access_key_id', 'credentials', 'passwords', 'apiKeys', 'api_keys', 'accessKeys',
      'private_keys', 'cookies', 'access_tokens', 'refreshTokens', 'api_tokens', 'authTokens', 'bearer_tokens', 'session_tokens']) {
      expect(isSecretKey(key), key).toBe(true);
    }
    for (const key of ['max_tokens', 'tokens', 'token_count', 'tokenizer', 'prompt_tokens', 'key', 'monkey', 'author', 'keyboard', 'question']) {
      expect(isSecretKey(key), key).toBe(false);
    }
  });

  it('splits camelCase keys after an acronym, so acronym-led secrets are masked and counts stay readable', () => {
    // LangChain JS's `new ChatOpenAI({ openAIApiKey })`, Azure's, AWS's and Hugging Face's spellings.
    for (const key of ['openAIApiKey', 'azureOpenAIApiKey', 'AWSSecretKey', 'AWSSecretAccessKey', 'HFToken', 'JWTToken',
      'IDToken', 'OAuthToken', 'CSRFToken', 'APIKeys', 'APITokens', 'githubPATToken', 'OPENAIApiKey',
      // Masked before the acronym split, and still: split alone, `APIkey` would read `ap ikey`.
      'APIkey', 'APIkeys', 'myAPIkey', 'OPENAI_APIkey']) {
      expect(isSecretKey(key), key).toBe(true);
    }
    for (const key of ['maxTokens', 'MAX_TOKENS', 'maxNewTokens', 'tokenCount', 'tokenizer', 'GPTTokenizer', 'inputTokens',
      'promptTokens', 'completionTokens', 'OPENAI_API_BASE', 'openAIApiBase', 'apiBase', 'APIVersion', 'keyId', 'AWSRegion',
      'HFModelId', 'JSONSchema', 'URLPath']) {
      expect(isSecretKey(key), key).toBe(false);
    }
    expect(copy({ openAIApiKey: 'sk-live-123', modelName: 'gpt-4o', maxTokens: 256 })).toEqual({
      openAIApiKey: REDACTED,
      modelName: 'gpt-4o',
      maxTokens: 256,
    });
  });

  it('masks nested keys, Map keys and parameters, leaving the rest', () => {
    expect(copy({ headers: { Authorization: 'Bearer x', accept: 'json' }, config: new Map([['apiKey', 'sk-1']]) })).toEqual({
      headers: { Authorization: REDACTED, accept: 'json' },
      config: { apiKey: REDACTED },
    });
    // Keys of several types: pairs, with string-keyed values masked all the same.
    const mixed = new Map<unknown, unknown>([['authorization', 'Bearer sk-3'], [1, 'x'], ['accept', 'json']]);
    expect(copy({ headers: mixed })).toEqual({ headers: [['authorization', REDACTED], [1, 'x'], ['accept', 'json']] });
  });

  it('adds listed keys (case-insensitive) to the default rule', () => {
    const redactor = compileRedactor(['SSN']);
    expect(copy({ ssn: '123', password: 'p', name: 'a' }, { redactor })).toEqual({ ssn: REDACTED, password: REDACTED, name: 'a' });
  });

  it('runs a redact function with key, value and path; a throwing one masks', () => {
    const calls: unknown[] = [];
    const redactor = compileRedactor((key, value, path) => {
      calls.push([key, path]);
      if (key === 'email') return '[email]';
      if (key === 'explode') throw new Error('redactor bug');
      return value;
    });
    expect(copy({ user: { email: 'a@b.c', explode: 1, name: 'n' }, token: 't' }, { redactor })).toEqual({
      user: { email: '[email]', explode: REDACTED, name: 'n' },
      token: REDACTED,
    });
    expect(calls).toContainEqual(['email', ['user', 'email']]);
    expect(calls.some((call) => (call as unknown[])[0] === 'token')).toBe(false);
  });

  it('redact: false masks nothing', () => {
    expect(copy({ password: 'p' }, { redactor: compileRedactor(false) })).toEqual({ password: 'p' });
  });
});

describe('capture never throws', () => {
  it('on a zoo of hostile values', () => {
    const zoo: unknown[] = [
      new Proxy({}, { getPrototypeOf: () => { throw new Error('proto'); } }),
      new Proxy([], { get: () => { throw new Error('get'); } }),
      Object.create(null),
      { toJSON: 5 },
      { [Symbol('s')]: 1 },
      new (class extends Array {})(),
      Object.freeze({ a: 1 }),
      globalThis.process.env,
    ];
    for (const value of zoo) expect(() => capture(value, policy())).not.toThrow();
  });
});
