/**
 * Indexed objects -> lists (SPEC §3, `src/mapping/indexed-lists.ts`): the values a call takes from
 * a span show `gen_ai.prompt.0.*`, `gen_ai.prompt.1.*` as a list, as the hosted service has them,
 * byte for byte the same on the exporter's fast path and the object path (which OTLP ingest uses),
 * while `otel_dump.attributes` and the fallback `attributes` keep the plain unflattened tree.
 */
import { afterAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { Attributes } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { toCompletedCall, toUpsertItems, writeCompletedCall, writeUpsertItems } from '../../src/mapping/index.js';
import { JsonWriter } from '../../src/wire/json-writer.js';
import { createTracing, PROJECT } from './fixtures.js';

const tracing = createTracing();
afterAll(() => tracing.shutdown());
const writer = new JsonWriter();

function written(write: (out: JsonWriter) => void): string {
  writer.begin();
  write(writer);
  return Buffer.from(writer.end()).toString('utf8');
}

/**
 * The span's call from both writers, after checking that each wrote the very bytes of
 * JSON.stringify of the object mapping (upsert items and completed call). JSON text attributes here
 * are compact, with integer keys first, so the fast path's verbatim copy of them in otel_dump is
 * also what JSON.stringify writes.
 */
function callOnBothPaths(attributes: Attributes): { start: Record<string, any>; end: Record<string, any>; span: ReadableSpan } {
  const { span } = tracing.finish({ attributes });
  const items = written((out) => writeUpsertItems(span, PROJECT, out));
  expect(items).toBe(toUpsertItems(span, PROJECT).map((item) => JSON.stringify(item)).join(','));
  const completed = written((out) => writeCompletedCall(span, PROJECT, out));
  expect(completed).toBe(JSON.stringify(toCompletedCall(span, PROJECT)));
  const [start, end] = JSON.parse(`[${items}]`) as Array<{ req: Record<string, any> }>;
  return { start: start!.req.start, end: end!.req.end, span };
}

const TRACELOOP_CHAT: Attributes = {
  'gen_ai.system': 'openai',
  'gen_ai.request.model': 'gpt-4o-mini',
  'gen_ai.prompt.0.role': 'system',
  'gen_ai.prompt.0.content': 'Be brief.',
  'gen_ai.prompt.1.role': 'user',
  'gen_ai.prompt.1.content': 'Weather in Amsterdam?',
  'gen_ai.completion.0.role': 'assistant',
  'gen_ai.completion.0.content': 'Cloudy, 14 degrees.',
  'gen_ai.completion.0.finish_reason': 'stop',
  'gen_ai.usage.prompt_tokens': 12,
  'gen_ai.usage.completion_tokens': 5,
};

describe('indexed objects become lists in the values a call takes from the span', () => {
  it('OpenLLMetry/Traceloop gen_ai.prompt.N.* / gen_ai.completion.N.*: lists in inputs and output, plain in otel_dump', () => {
    const { start, end } = callOnBothPaths(TRACELOOP_CHAT);
    expect(start.inputs).toEqual({
      'gen_ai.prompt': [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather in Amsterdam?' },
      ],
    });
    expect(end.output).toEqual({ 'gen_ai.completion': [{ role: 'assistant', content: 'Cloudy, 14 degrees.', finish_reason: 'stop' }] });
    expect(start.otel_dump.attributes.gen_ai.prompt).toEqual({
      0: { role: 'system', content: 'Be brief.' },
      1: { role: 'user', content: 'Weather in Amsterdam?' },
    });
    expect(start.otel_dump.attributes.gen_ai.completion).toEqual({ 0: { role: 'assistant', content: 'Cloudy, 14 degrees.', finish_reason: 'stop' } });
  });

  it('keeps a Traceloop span on the fast path, which writes each message once and copies it into otel_dump', () => {
    // JSON text with its own spacing: only the fast path writes it verbatim.
    const marker = '{ "run" :  1 }';
    const { span } = tracing.finish({ attributes: { ...TRACELOOP_CHAT, 'traceloop.association.properties': marker } });
    const items = written((out) => writeUpsertItems(span, PROJECT, out));
    expect(items).toContain(marker);
    expect(JSON.parse(`[${items}]`)).toEqual(JSON.parse(JSON.stringify(toUpsertItems(span, PROJECT))));
    const [start] = JSON.parse(`[${items}]`) as Array<{ req: Record<string, any> }>;
    expect(start!.req.start.inputs['gen_ai.prompt']).toHaveLength(2);
  });

  it('OpenInference llm.input_messages.N.*: not a source of inputs (input.value is), so only otel_dump has them, indexed', () => {
    const { start } = callOnBothPaths({
      'openinference.span.kind': 'LLM',
      'llm.model_name': 'gpt-4o-mini',
      'input.value': '{"messages":[{"role":"user","content":"hi"}]}',
      'llm.input_messages.0.message.role': 'user',
      'llm.input_messages.0.message.content': 'hi',
      'llm.output_messages.0.message.role': 'assistant',
      'llm.output_messages.0.message.content': 'hello',
      // Indexed, in a curated attribute: converted.
      'llm.invocation_parameters': '{"stop":{"0":"END","1":"STOP"}}',
    });
    expect(start.inputs).toEqual({ 'input.value': { messages: [{ role: 'user', content: 'hi' }] } });
    expect(start.attributes).toEqual({ kind: 'LLM', model: 'gpt-4o-mini', model_parameters: { stop: ['END', 'STOP'] } });
    expect(start.otel_dump.attributes.llm.input_messages).toEqual({ 0: { message: { role: 'user', content: 'hi' } } });
    expect(start.otel_dump.attributes.llm.invocation_parameters).toEqual({ stop: { 0: 'END', 1: 'STOP' } });
  });

  it.each<[string, Attributes, unknown]>([
    ['a gap (0, 2)', { 'gen_ai.prompt.0.content': 'a', 'gen_ai.prompt.2.content': 'c' }, { 0: { content: 'a' }, 2: { content: 'c' } }],
    ['"01" beside "0"', { 'gen_ai.prompt.0.content': 'a', 'gen_ai.prompt.01.content': 'b' }, { 0: { content: 'a' }, '01': { content: 'b' } }],
    ['a lone "1"', { 'gen_ai.prompt.1.content': 'b' }, { 1: { content: 'b' } }],
    ['"-1" beside "0"', { 'gen_ai.prompt.0.content': 'a', 'gen_ai.prompt.-1.content': 'z' }, { 0: { content: 'a' }, '-1': { content: 'z' } }],
    ['mixed keys (0, a)', { 'gen_ai.prompt.0.content': 'x', 'gen_ai.prompt.a': 'y' }, { 0: { content: 'x' }, a: 'y' }],
  ])('keeps an object whose keys are not exactly 0..n-1 as it is: %s (beside a completion that converts)', (_name, prompt, expected) => {
    const { start, end } = callOnBothPaths({ ...prompt, 'gen_ai.completion.0.content': 'ok' });
    expect(start.inputs).toEqual({ 'gen_ai.prompt': expected });
    expect(end.output).toEqual({ 'gen_ai.completion': [{ content: 'ok' }] });
  });

  it('converts innermost first: indexed content parts inside indexed messages, and indexes within indexes', () => {
    const { start, end } = callOnBothPaths({
      'gen_ai.prompt.0.role': 'user',
      'gen_ai.prompt.0.content.0.type': 'text',
      'gen_ai.prompt.0.content.0.text': 'What is this?',
      'gen_ai.prompt.0.content.1.type': 'image_url',
      'gen_ai.prompt.0.content.1.image_url.url': 'https://example.com/cat.png',
      'gen_ai.completion.0.0': 'a',
      'gen_ai.completion.0.1': 'b',
      'gen_ai.completion.1.0': 'c',
    });
    expect(start.inputs).toEqual({
      'gen_ai.prompt': [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
          ],
        },
      ],
    });
    expect(end.output).toEqual({ 'gen_ai.completion': [['a', 'b'], ['c']] });
  });

  it('does not look into lists, as the hosted service does not: an indexed object inside a JSON array stays', () => {
    const { start, end } = callOnBothPaths({
      'input.value': '[{"0":"a","1":"b"}]',
      'output.value': '{"list":[{"0":"x"}],"object":{"0":[{"0":"y"}]}}',
    });
    expect(start.inputs).toEqual({ 'input.value': [{ 0: 'a', 1: 'b' }] });
    expect(end.output).toEqual({ 'output.value': { list: [{ 0: 'x' }], object: [[{ 0: 'y' }]] } });
  });

  it('turns an empty object inside a taken value into [] (as the hosted code does), but not one inside a list', () => {
    const { start } = callOnBothPaths({ 'input.value': '{"options":{},"history":[{}],"q":"hi"}' });
    expect(start.inputs).toEqual({ 'input.value': { options: [], history: [{}], q: 'hi' } });
    expect(start.otel_dump.attributes.input.value).toEqual({ options: {}, history: [{}], q: 'hi' });
  });

  it('converts JSON text that is an indexed object (input.value, and a bare input, which then stays keyed)', () => {
    const first = callOnBothPaths({ 'input.value': '{"0":"a","1":"b"}' });
    expect(first.start.inputs).toEqual({ 'input.value': ['a', 'b'] });
    expect(first.start.otel_dump.attributes.input.value).toEqual({ 0: 'a', 1: 'b' });
    // The hosted service converts before it unwraps `input`: a list is not an object to unwrap.
    const bare = callOnBothPaths({ input: '{"0":"a"}', output: '{"0":"a","1":"b"}' });
    expect(bare.start.inputs).toEqual({ input: ['a'] });
    expect(bare.end.output).toEqual(['a', 'b']);
  });

  it('converts the members merged from wandb.attributes, and the curated attributes and counts', () => {
    const { start, end } = callOnBothPaths({
      'gen_ai.system': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.request.stop_sequences.0': 'END',
      'gen_ai.usage.input_tokens.0': 5,
      'wandb.attributes': '{"0":{"0":"zero"},"tags":{"0":"prod","1":"eu"},"env":"ci"}',
    });
    expect(start.attributes).toEqual({
      system: 'openai',
      model: 'gpt-4o',
      model_parameters: { model: 'gpt-4o', stop_sequences: ['END'] },
      0: ['zero'],
      tags: ['prod', 'eu'],
      env: 'ci',
    });
    expect(end.summary).toEqual({ usage: { 'gpt-4o': { input_tokens: [5] } } });
    expect(start.otel_dump.attributes.wandb.attributes.tags).toEqual({ 0: 'prod', 1: 'eu' });
  });

  it('writes the same bytes on both paths for arbitrary indexed keys and JSON values (property)', () => {
    const segment = fc.constantFrom('gen_ai', 'prompt', 'completion', 'request', 'input', 'value', 'wandb', 'attributes', '0', '1', '2', '01', 'a');
    const key = fc.array(segment, { minLength: 1, maxLength: 5 }).map((segments) => segments.join('.'));
    const { tree } = fc.letrec<{ tree: unknown }>((tie) => ({
      tree: fc.oneof(
        { depthSize: 'small' },
        fc.constantFrom('x', 1, true, null),
        fc.array(tie('tree'), { maxLength: 3 }),
        fc.dictionary(fc.constantFrom('0', '1', '2', '01', 'a'), tie('tree'), { maxKeys: 3 }),
      ),
    }));
    // Stringified by JSON.stringify: compact, integer keys first, so a copy of the text is its bytes.
    const value = fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), tree.map((json) => JSON.stringify(json)));
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 10 }), (attributes) => {
        callOnBothPaths(attributes as Attributes);
      }),
      { numRuns: 300 },
    );
  });

  it('leaves the fallback attributes (no convention matched: all span attributes) as the plain tree', () => {
    const { start } = callOnBothPaths({ 'custom.0': 'a', 'custom.1': 'b', 'wandb.attributes.tags.0': 'x' });
    expect(start.attributes).toEqual({ custom: { 0: 'a', 1: 'b' }, wandb: { attributes: { tags: { 0: 'x' } } } });
    expect(start.inputs).toEqual({});
  });
});
