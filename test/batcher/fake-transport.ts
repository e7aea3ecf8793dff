/**
 * A scripted in-memory Transport for the batcher's scheduling tests (used with fake timers, where
 * real sockets would not advance). Behaviour tests use real HTTP instead (see `fault-proxy.ts`).
 */
import type { PostOptions, SendOutcome, Transport } from '../../src/client/transport.js';
import type { RecordCodec } from '../../src/batcher/index.js';
import { resolveDelivery, type DeliveryOptions } from '../../src/options.js';
import type { BatcherOptions } from '../../src/batcher/index.js';

export interface Posted {
  readonly path: string;
  readonly body: string;
  readonly ids: string[];
  readonly options: PostOptions | undefined;
}

export type Script = (request: Posted, index: number) => SendOutcome | Promise<SendOutcome>;

export const OK: SendOutcome = { kind: 'ok', status: 200, body: {} };

export class FakeTransport implements Transport {
  readonly posted: Posted[] = [];
  outstanding = 0;
  maxOutstanding = 0;
  closed = 0;
  #script: Script;

  constructor(script: Script = () => OK) {
    this.#script = script;
  }

  setScript(script: Script): void {
    this.#script = script;
  }

  async post(path: string, body: string | Uint8Array, options?: PostOptions): Promise<SendOutcome> {
    const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
    const request: Posted = { path, body: text, ids: idsOf(text), options };
    this.posted.push(request);
    this.outstanding += 1;
    this.maxOutstanding = Math.max(this.maxOutstanding, this.outstanding);
    try {
      return await this.#script(request, this.posted.length - 1);
    } finally {
      this.outstanding -= 1;
    }
  }

  async close(): Promise<void> {
    this.closed += 1;
  }

  /** Ids in acknowledged requests (every request the script answered ok is counted by the caller). */
  allIds(): string[] {
    return this.posted.flatMap((request) => request.ids);
  }
}

/** Record ids carried by a body, in order, once per record (the start item, or the completed call). */
export function idsOf(body: string): string[] {
  const parsed = JSON.parse(body) as { batch: Array<Record<string, any>> };
  return parsed.batch.flatMap((item) => {
    if (item.mode === 'start') return [item.req.start.id as string];
    if (item.mode === 'end') return [];
    return [item.id as string];
  });
}

export interface TestRecord {
  readonly id: string;
  readonly payload?: string;
}

export function record(index: number, payload = ''): TestRecord {
  return { id: index.toString(16).padStart(16, '0'), payload };
}

/** A codec over test records that counts its mapping work (to prove JSON is built once). */
export function countingCodec(): RecordCodec<TestRecord> & { mapped: number } {
  const codec = {
    mapped: 0,
    estimateBytes: (item: TestRecord) => 200 + (item.payload?.length ?? 0),
    toUpsertItems(item: TestRecord) {
      codec.mapped += 1;
      return [
        { mode: 'start', req: { start: { project_id: 'acme/demo', id: item.id, payload: item.payload } } },
        { mode: 'end', req: { end: { project_id: 'acme/demo', id: item.id, summary: {} } } },
      ];
    },
    toCompletedCall(item: TestRecord) {
      codec.mapped += 1;
      return { project_id: 'acme/demo', id: item.id, payload: item.payload };
    },
  };
  return codec;
}

export function batcherOptions(
  transport: Transport,
  codec: RecordCodec<TestRecord>,
  delivery: DeliveryOptions = {},
): BatcherOptions<TestRecord> {
  return {
    ...resolveDelivery(delivery),
    projectId: 'acme/demo',
    baseUrl: 'http://127.0.0.1:9',
    username: 'dev',
    transport,
    codec,
    random: () => 0.5,
  };
}

/** A promise with its resolve function, for holding a request open. */
export function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}
