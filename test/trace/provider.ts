/**
 * A real SDK provider for the trace tests: NodeTracerProvider (AsyncLocalStorage context) with an
 * in-memory exporter behind SimpleSpanProcessor, registered globally like `register()` does.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-node';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';

export interface TestProvider {
  readonly provider: NodeTracerProvider;
  /** Warnings the SDK logged (e.g. "You can only call end() on a span once"). */
  readonly warnings: string[];
  spans(): ReadableSpan[];
  span(name: string): ReadableSpan;
  reset(): void;
}

export function installProvider(): TestProvider {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  provider.register();
  const warnings: string[] = [];
  const collect = (message: string) => void warnings.push(message);
  diag.setLogger({ error: collect, warn: collect, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN);
  const spans = () => exporter.getFinishedSpans();
  return {
    provider,
    warnings,
    spans,
    span(name) {
      const found = spans().filter((span) => span.name === name);
      if (found.length !== 1) throw new Error(`expected one span named ${name}, found ${found.length}`);
      return found[0]!;
    },
    reset: () => {
      exporter.reset();
      warnings.length = 0;
    },
  };
}

/** The parsed JSON of a span attribute written as JSON text. */
export function jsonAttribute(span: ReadableSpan, key: string): unknown {
  const value = span.attributes[key];
  if (typeof value !== 'string') throw new Error(`attribute ${key} is ${typeof value}, not JSON text`);
  return JSON.parse(value);
}

export function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

/**
 * Collect garbage, and let the FinalizationRegistry callbacks run, until `done()` or for about
 * `ms`: a call ends as abandoned only once its stream or promise is collected.
 */
export async function collectGarbageUntil(done: () => boolean, ms = 100): Promise<void> {
  // A gc() function without restarting node with --expose-gc.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const deadline = Date.now() + ms;
  do {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  } while (!done() && Date.now() < deadline);
}
