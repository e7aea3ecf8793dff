/**
 * The spans every side exports: made by the real OTel SDK, identical for the OTLP exporter and
 * callbridge. A trace is a root and nine children; each span carries ten attributes shaped like an
 * LLM call (strings, numbers, a JSON-ish `input.value`), so the mapping of SPEC §3 finds a system,
 * a model, usage, inputs and output, as it would for real instrumentation.
 */
import { context, trace as otelTrace } from '@opentelemetry/api';

export const SPANS_PER_TRACE = 10;

// A small pool of prompt texts so the spans are not byte-identical (compressors and caches do not
// get a free ride) while building a span costs the same on every side.
const PROMPTS = Array.from({ length: 64 }, (_, i) =>
  JSON.stringify([
    { role: 'system', content: 'You are a careful assistant. Answer in one paragraph.' },
    { role: 'user', content: `Question ${i}: how many moons does planet ${i % 8} have, and why does it matter for tides?` },
  ]),
);
const ANSWERS = Array.from(
  { length: 64 },
  (_, i) => `Planet ${i % 8} has ${i % 5} known moons; tidal effects scale with mass over distance cubed, so the largest moon dominates.`,
);
const MODELS = ['gpt-4o-mini', 'claude-3-5-haiku', 'gemini-1.5-flash'];

/** The ten attributes of span `i` (a plain object; the SDK copies it). */
export function spanAttributes(i) {
  const input = 180 + (i % 400);
  return {
    'gen_ai.system': 'openai',
    'gen_ai.operation.name': 'chat',
    'gen_ai.request.model': MODELS[i % MODELS.length],
    'gen_ai.request.temperature': 0.2,
    'gen_ai.request.max_tokens': 512,
    'gen_ai.usage.input_tokens': input,
    'gen_ai.usage.output_tokens': 40 + (i % 200),
    'session.id': `session-${i % 97}`,
    'input.value': PROMPTS[i % PROMPTS.length],
    'output.value': ANSWERS[i % ANSWERS.length],
  };
}

/**
 * Produce one trace (a root and nine children, each ended) on `tracer`. `onEnd(ms)` if given
 * receives how long each `span.end()` took, the place where a batching processor stalls.
 */
export function produceTrace(tracer, seq, onEnd) {
  const root = tracer.startSpan('agent.run', { attributes: spanAttributes(seq) });
  const parent = otelTrace.setSpan(context.active(), root);
  for (let c = 1; c < SPANS_PER_TRACE; c++) {
    const child = tracer.startSpan('llm.chat', { attributes: spanAttributes(seq + c) }, parent);
    endSpan(child, onEnd);
  }
  endSpan(root, onEnd);
}

function endSpan(span, onEnd) {
  if (onEnd === undefined) {
    span.end();
    return;
  }
  const t0 = performance.now();
  span.end();
  onEnd(performance.now() - t0);
}

const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Produce `totalSpans` as fast as the process can, yielding to the event loop after every
 * `tracesPerTick` traces so the exporter's I/O can progress, as a busy service's loop would.
 */
export async function produceFlatOut(tracer, totalSpans, { tracesPerTick = 10 } = {}) {
  const traces = Math.ceil(totalSpans / SPANS_PER_TRACE);
  for (let t = 0; t < traces; t++) {
    produceTrace(tracer, t * SPANS_PER_TRACE);
    if ((t + 1) % tracesPerTick === 0) await yieldToLoop();
  }
  return traces * SPANS_PER_TRACE;
}

/**
 * Produce spans at `spansPerSecond` for `durationMs`, from a 1 ms timer that catches up to the
 * schedule (so a slow tick is followed by a bigger one, as a real request load would be). Small
 * ticks keep our own production from being mistaken for an exporter stall.
 */
export function producePaced(tracer, { spansPerSecond, durationMs, onEnd }) {
  return new Promise((resolve) => {
    const start = performance.now();
    const totalTraces = Math.round((spansPerSecond * durationMs) / 1000 / SPANS_PER_TRACE);
    let traces = 0;
    const timer = setInterval(() => {
      const elapsed = performance.now() - start;
      const due = Math.min(totalTraces, Math.floor((elapsed * spansPerSecond) / 1000 / SPANS_PER_TRACE));
      while (traces < due) {
        produceTrace(tracer, traces * SPANS_PER_TRACE, onEnd);
        traces++;
      }
      if (traces >= totalTraces) {
        clearInterval(timer);
        resolve({ spans: traces * SPANS_PER_TRACE, elapsedMs: performance.now() - start });
      }
    }, 1);
  });
}
