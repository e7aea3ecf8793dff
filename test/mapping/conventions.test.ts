import { afterAll, describe, expect, it } from 'vitest';
import { toCallParts } from '../../src/mapping/index.js';
import { createTracing, PROJECT } from './fixtures.js';

const tracing = createTracing();
afterAll(() => tracing.shutdown());

function callOf(attributes: Record<string, string | number | boolean | string[]>, name = 'llm') {
  const { span } = tracing.finish({ name, attributes });
  const { start, end } = toCallParts(span, PROJECT);
  return { start, end, spanId: span.spanContext().spanId };
}

/** The call content fields only (ids, times and otel_dump are covered in to-call.test.ts). */
function contentOf(attributes: Record<string, string | number | boolean | string[]>) {
  const { start, end } = callOf(attributes);
  return { attributes: start.attributes, inputs: start.inputs, output: end.output, summary: end.summary };
}

describe('OpenInference', () => {
  it('maps input.value, output.value, llm.* and token counts', () => {
    expect(
      contentOf({
        'openinference.span.kind': 'LLM',
        'llm.model_name': 'gpt-4o-mini',
        'llm.provider': 'openai',
        'llm.system': 'openai',
        'llm.invocation_parameters': '{"temperature":0.5}',
        'input.value': '{"messages":[{"role":"user","content":"hi"}]}',
        'input.mime_type': 'application/json',
        'output.value': 'hello',
        'llm.token_count.prompt': 12,
        'llm.token_count.completion': 3,
      }),
    ).toEqual({
      attributes: {
        system: 'openai',
        kind: 'LLM',
        model: 'gpt-4o-mini',
        provider: 'openai',
        model_parameters: { temperature: 0.5 },
      },
      inputs: { 'input.value': { messages: [{ role: 'user', content: 'hi' }] } },
      output: { 'output.value': 'hello' },
      summary: { usage: { 'gpt-4o-mini': { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } } },
    });
  });

  it('keeps a given total and does not invent one from a single count', () => {
    expect(contentOf({ 'llm.token_count.prompt': 4, 'llm.token_count.total': 9 }).summary).toEqual({
      usage: { usage: { prompt_tokens: 4, total_tokens: 9 } },
    });
    expect(contentOf({ 'llm.token_count.completion': 4 }).summary).toEqual({
      usage: { usage: { completion_tokens: 4 } },
    });
  });
});

describe('GenAI semantic conventions', () => {
  it('maps gen_ai.* attributes, JSON-text messages and usage', () => {
    const messagesIn = [{ role: 'user', parts: [{ type: 'text', content: 'hi' }] }];
    const messagesOut = [{ role: 'assistant', parts: [{ type: 'text', content: 'hello' }], finish_reason: 'stop' }];
    const { start, end } = callOf({
      'gen_ai.system': 'anthropic',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'claude-x',
      'gen_ai.request.max_tokens': 256,
      'gen_ai.response.model': 'claude-x-2025',
      'gen_ai.input.messages': JSON.stringify(messagesIn),
      'gen_ai.output.messages': JSON.stringify(messagesOut),
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 4,
      'gen_ai.conversation.id': 'conv-1',
      'gen_ai.agent.name': 'helper',
      'gen_ai.agent.tools': '["search","calc"]',
    });
    expect(start.attributes).toEqual({
      system: 'anthropic',
      model: 'claude-x-2025',
      provider: 'anthropic',
      model_parameters: { model: 'claude-x', max_tokens: 256 },
      agent: 'helper',
      tools: ['search', 'calc'],
      operation: 'chat',
    });
    expect(start.inputs).toEqual({ 'gen_ai.input.messages': messagesIn });
    expect(end.output).toEqual({ 'gen_ai.output.messages': messagesOut });
    expect(end.summary).toEqual({ usage: { 'claude-x-2025': { input_tokens: 10, output_tokens: 4, total_tokens: 14 } } });
    expect(start.thread_id).toBe('conv-1');
    expect(start).not.toHaveProperty('turn_id');
  });

  it('reads indexed gen_ai.prompt / gen_ai.completion keys as lists, as the hosted service has them', () => {
    expect(
      contentOf({
        'gen_ai.prompt.0.role': 'user',
        'gen_ai.prompt.0.content': 'hi',
        'gen_ai.prompt.1.role': 'user',
        'gen_ai.prompt.1.content': 'again',
        'gen_ai.completion.0.content': 'hello',
        'gen_ai.usage.prompt_tokens': '7',
        'gen_ai.usage.completion_tokens': 2,
        'gen_ai.request.model': 'gpt-4o',
      }),
    ).toEqual({
      attributes: { model: 'gpt-4o', model_parameters: { model: 'gpt-4o' } },
      inputs: { 'gen_ai.prompt': [{ role: 'user', content: 'hi' }, { role: 'user', content: 'again' }] },
      output: { 'gen_ai.completion': [{ content: 'hello' }] },
      summary: { usage: { 'gpt-4o': { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 } } },
    });
  });

  it('takes the usage key from model_parameters.model when no model attribute is set', () => {
    const { start, end } = callOf({ 'llm.invocation_parameters': '{"model":"mistral-small"}', 'gen_ai.usage.input_tokens': 1 });
    expect(start.attributes).toEqual({ model_parameters: { model: 'mistral-small' } });
    expect(end.summary).toEqual({ usage: { 'mistral-small': { input_tokens: 1 } } });
  });
});

describe('Vercel AI SDK', () => {
  it('maps ai.prompt, ai.response.*, ai.usage.* and ai.model.*', () => {
    expect(
      contentOf({
        'ai.model.id': 'gpt-4o',
        'ai.model.provider': 'openai.chat',
        'ai.prompt': '{"prompt":"Why?"}',
        'ai.response.text': 'Because.',
        'ai.response.finishReason': 'stop',
        'ai.usage.promptTokens': 5,
        'ai.usage.completionTokens': 7,
        'operation.name': 'ai.generateText',
      }),
    ).toEqual({
      attributes: { model: 'gpt-4o', provider: 'openai.chat' },
      inputs: { 'ai.prompt': { prompt: 'Why?' } },
      output: { 'ai.response': { text: 'Because.', finishReason: 'stop' } },
      summary: { usage: { 'gpt-4o': { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } } },
    });
  });

  it('maps the newer inputTokens/outputTokens names', () => {
    expect(contentOf({ 'ai.usage.inputTokens': 3, 'ai.usage.outputTokens': 4 }).summary).toEqual({
      usage: { usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 } },
    });
  });
});

describe('Traceloop', () => {
  it('maps traceloop.entity.input/output and traceloop.span.kind', () => {
    expect(
      contentOf({
        'traceloop.span.kind': 'workflow',
        'traceloop.entity.name': 'plan',
        'traceloop.entity.input': '{"inputs":{"goal":"ship"},"tags":[]}',
        'traceloop.entity.output': '"done"',
      }),
    ).toEqual({
      attributes: { kind: 'workflow' },
      inputs: { 'traceloop.entity.input': { inputs: { goal: 'ship' }, tags: [] } },
      // Only text starting with `{` or `[` is parsed, as the hosted service does.
      output: { 'traceloop.entity.output': '"done"' },
      summary: {},
    });
  });
});

describe('bare input/inputs/output/outputs (the trace wrapper, Pydantic models)', () => {
  it('uses an inputs object as the inputs and an output value as the output', () => {
    expect(contentOf({ inputs: '{"question":"why","n":2}', output: '{"answer":42}', 'weave.span.kind': 'tool' })).toEqual({
      attributes: { kind: 'tool' },
      inputs: { question: 'why', n: 2 },
      output: { answer: 42 },
      summary: {},
    });
  });

  it('keeps a non-object input under its key and passes scalar outputs through', () => {
    const content = contentOf({ input: '[1,2]', outputs: 42 });
    expect(content.inputs).toEqual({ input: [1, 2] });
    expect(content.output).toBe(42);
  });

  it('prefers the listed order and skips empty values', () => {
    const content = contentOf({ 'ai.prompt': '', 'input.value': 'second', input: 'last', 'output.value': '[]', output: 'x' });
    expect(content.inputs).toEqual({ 'input.value': 'second' });
    // An empty list is not a value: the next source wins.
    expect(content.output).toBe('x');
  });
});

describe('wandb.* attributes', () => {
  it('sets display name, thread, turn, run and custom attributes', () => {
    const { start, end, spanId } = callOf({
      'wandb.display_name': 'Nice name',
      'wandb.thread_id': 't-1',
      'wandb.is_turn': true,
      'wandb.wb_run_id': 'run-7',
      'wandb.wb_run_step': 3,
      'wandb.wb_run_step_end': 5,
      'wandb.attributes': '{"env":"prod","tier":1}',
      'input.value': 'x',
      'gen_ai.conversation.id': 'loses-to-wandb.thread_id',
    });
    expect(start).toMatchObject({
      display_name: 'Nice name',
      thread_id: 't-1',
      turn_id: spanId,
      wb_run_id: 'acme/demo:run-7',
      wb_run_step: 3,
      attributes: { env: 'prod', tier: 1 },
      inputs: { 'input.value': 'x' },
    });
    expect(end.wb_run_step_end).toBe(5);
  });

  it('gives no turn without a thread, and falls back to session.id for the thread', () => {
    expect(callOf({ 'wandb.is_turn': true, 'input.value': 'x' }).start).not.toHaveProperty('turn_id');
    const { start } = callOf({ 'session.id': 's-9', 'wandb.is_turn': false });
    expect(start.thread_id).toBe('s-9');
    expect(start).not.toHaveProperty('turn_id');
  });

  it('merges wandb.attributes over the curated attributes, from JSON text or dotted keys', () => {
    expect(callOf({ 'llm.model_name': 'm1', 'wandb.attributes': '{"model":"override","x":1}' }).start.attributes).toEqual({
      model: 'override',
      x: 1,
    });
    expect(callOf({ 'llm.system': 's', 'wandb.attributes.env': 'dev' }).start.attributes).toEqual({ system: 's', env: 'dev' });
  });

  it('keeps all span attributes when nothing but wandb.attributes was found', () => {
    expect(callOf({ 'wandb.attributes': '{"env":"prod"}', 'app.x': 1 }).start.attributes).toEqual({
      wandb: { attributes: { env: 'prod' } },
      app: { x: 1 },
    });
  });

  it('qualifies plain run ids, keeps this project\'s, drops malformed ones', () => {
    expect(callOf({ 'wandb.wb_run_id': 'acme/demo:r1', 'input.value': 'x' }).start.wb_run_id).toBe('acme/demo:r1');
    expect(callOf({ 'wandb.wb_run_id': 'other/proj:r1', 'input.value': 'x' }).start).not.toHaveProperty('wb_run_id');
    expect(callOf({ 'wandb.wb_run_id': 'a/b', 'input.value': 'x' }).start).not.toHaveProperty('wb_run_id');
  });

  it('reads run steps as integers the way the hosted service does', () => {
    expect(callOf({ 'wandb.wb_run_step': '4', 'input.value': 'x' }).start.wb_run_step).toBe(4);
    expect(callOf({ 'wandb.wb_run_step': 2.9, 'input.value': 'x' }).start.wb_run_step).toBe(2);
    // 0 is "empty" to the hosted service, and text that is not an integer is no step at all.
    expect(callOf({ 'wandb.wb_run_step': 0, 'input.value': 'x' }).start).not.toHaveProperty('wb_run_step');
    expect(callOf({ 'wandb.wb_run_step': 'four', 'input.value': 'x' }).start).not.toHaveProperty('wb_run_step');
  });

  it('shortens a display name over 1024 characters with "..."', () => {
    const long = `${'word '.repeat(250)}end`;
    const { start } = callOf({ 'wandb.display_name': long, 'input.value': 'x' });
    expect(start.display_name!.length).toBeLessThanOrEqual(1024);
    expect(start.display_name).toMatch(/^word( word)+ \.\.\.$/);
    expect(callOf({ 'wandb.display_name': 'a'.repeat(1024), 'input.value': 'x' }).start.display_name).toBe('a'.repeat(1024));
  });
});
