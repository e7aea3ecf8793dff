/**
 * Call items as JSON text (SPEC §3, §4.2): byte for byte what `JSON.stringify` gives for the items
 * of {@link toUpsertItems}, for less CPU. The exporter sends these texts; the server's OTLP ingest
 * keeps using the objects.
 *
 * The saving: `otel_dump.resource` is the same for every span of a provider, yet stringifying it
 * was some 0.8 µs of every span (measured with the benchmark's spans, Node 20). Its text is made
 * once per resource and spliced in where a marker stands in the span's own `JSON.stringify`.
 *
 * Measured and rejected: writing the items with a JavaScript JSON writer (to splice shared texts
 * anywhere, e.g. the parsed `input.value` that `inputs` and `otel_dump.attributes` both hold) was
 * 30-40 % slower than one `JSON.stringify` per item: V8 11's `JSON.stringify` has a high cost per
 * call and per object, but a JavaScript writer has a higher one, so fewer, larger calls win.
 */
import { randomBytes } from 'node:crypto';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { SpanInput } from './span-input.js';
import { toCallParts } from './to-call.js';

/**
 * Stands for the resource in the JSON text, as a JSON string `"<marker>"`. Random per process, so
 * no attribute value can spell it; and as `"` inside a string is always escaped, `"<marker>"` can
 * only be a whole JSON string, not part of one.
 */
const RESOURCE_MARKER = `callbridge-resource-${randomBytes(12).toString('hex')}`;
const QUOTED_RESOURCE_MARKER = `"${RESOURCE_MARKER}"`;

// otel_dump.resource as text, by the resource object of the span's otel_dump: `buildOtelDump`
// returns a fresh `{attributes, dropped_attributes_count}` but its `attributes` is one cached
// object per provider. Then by dropped count (a number). Weak, like that cache.
const resourceTexts = new WeakMap<object, Map<number, string>>();

/**
 * Maps a span to its two `call/upsert_batch` items as JSON text, start first: the same text as
 * `toUpsertItems(span, projectId).map((item) => JSON.stringify(item))`. Throws what
 * `JSON.stringify` throws (a value it cannot write).
 *
 * @example
 * const [start, end] = toUpsertItemTexts(readableSpan, 'acme/demo');
 * JSON.parse(start).mode; // 'start'
 */
export function toUpsertItemTexts(span: SpanInput | ReadableSpan, projectId: string): [string, string] {
  const { start, end } = toCallParts(span, projectId);
  const dump = start.otel_dump;
  const resource = dump?.resource;
  const resourceText = resource === undefined ? undefined : cachedResourceText(resource);
  let startText: string;
  if (resourceText === undefined) {
    startText = JSON.stringify({ mode: 'start', req: { start } });
  } else {
    // The dump is this span's own object (made per span by buildOtelDump): swap the marker in.
    (dump as Record<string, unknown>).resource = RESOURCE_MARKER;
    try {
      startText = JSON.stringify({ mode: 'start', req: { start } });
    } finally {
      (dump as Record<string, unknown>).resource = resource;
    }
    // The resource comes after the span's attributes, events and links in otel_dump, and only the
    // scope and a few call fields follow it: search from the end.
    const at = startText.lastIndexOf(QUOTED_RESOURCE_MARKER);
    startText = startText.slice(0, at) + resourceText + startText.slice(at + QUOTED_RESOURCE_MARKER.length);
  }
  return [startText, JSON.stringify({ mode: 'end', req: { end } })];
}

/** The resource's JSON text when it has the shape buildOtelDump gives it, else undefined. */
function cachedResourceText(resource: unknown): string | undefined {
  if (typeof resource !== 'object' || resource === null || Object.keys(resource).length !== 2) return undefined;
  const { attributes, dropped_attributes_count: dropped } = resource as Record<string, unknown>;
  if (typeof attributes !== 'object' || attributes === null || typeof dropped !== 'number') return undefined;
  let byDropped = resourceTexts.get(attributes);
  if (byDropped === undefined) {
    byDropped = new Map();
    resourceTexts.set(attributes, byDropped);
  }
  let text = byDropped.get(dropped);
  if (text === undefined) {
    text = JSON.stringify(resource);
    // Almost always 0; a bound keeps a resource with changing counts from growing the map.
    if (byDropped.size < 8) byDropped.set(dropped, text);
  }
  return text;
}
