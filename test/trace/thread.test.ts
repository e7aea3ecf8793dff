import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { setCallAttributes, trace, withThread } from '../../src/trace/index.js';
import { installProvider, jsonAttribute } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

const tool = trace(async function tool() {
  await new Promise((resolve) => setTimeout(resolve, 1));
  return 'ok';
});
const reply = trace(async function reply(message: string) {
  await tool();
  return `echo ${message}`;
});

describe('withThread', () => {
  it('puts every call inside in the thread; only the outermost is the turn', async () => {
    const result = await withThread('conv-1', () => reply('hi'));
    expect(result).toBe('echo hi');
    expect(tracing.span('reply').attributes).toMatchObject({ 'wandb.thread_id': 'conv-1', 'wandb.is_turn': true });
    expect(tracing.span('tool').attributes).toMatchObject({ 'wandb.thread_id': 'conv-1', 'wandb.is_turn': false });
  });

  it('makes each top-level call inside one withThread its own turn', async () => {
    await withThread('conv-2', async () => {
      await reply('a');
      await reply('b');
    });
    const replies = tracing.spans().filter((span) => span.name === 'reply');
    expect(replies.map((span) => span.attributes['wandb.is_turn'])).toEqual([true, true]);
  });

  it('turn: false groups without turns; outside a thread nothing is set', async () => {
    await withThread('conv-3', () => reply('x'), { turn: false });
    expect(tracing.span('reply').attributes['wandb.is_turn']).toBe(false);
    tracing.reset();
    await reply('y');
    expect(tracing.span('reply').attributes['wandb.thread_id']).toBeUndefined();
  });

  it('returns sync results and rejects a bad thread id', () => {
    expect(withThread('t', () => 5)).toBe(5);
    expect(() => withThread('', () => 1)).toThrow(/`threadId`/);
  });

  it('refuses a body that is not a function and a turn that is not a boolean, naming them', () => {
    expect(() => withThread('t', 'notfn' as unknown as () => void)).toThrow(/`fn` to be a function \(the code to run in the thread\), got "notfn"$/);
    expect(() => withThread('t', () => 1, { turn: 'yes' as unknown as boolean })).toThrow(/`turn` to be a boolean, got "yes"$/);
    expect(() => withThread('t', () => 1, null as unknown as { turn?: boolean })).toThrow(/`options` to be an object, got null$/);
  });
});

describe('setCallAttributes', () => {
  it('merges into wandb.attributes of the current call, captured and redacted', async () => {
    const handler = trace(async function handler() {
      setCallAttributes({ env: 'prod', tier: 'free' });
      await Promise.resolve();
      setCallAttributes({ tier: 'pro', api_key: 'sk-1', when: new Date('2026-01-01T00:00:00Z') });
      await tool();
    });
    await handler();
    expect(jsonAttribute(tracing.span('handler'), 'wandb.attributes')).toEqual({
      env: 'prod',
      tier: 'pro',
      api_key: '[REDACTED]',
      when: '2026-01-01T00:00:00.000Z',
    });
    expect(tracing.span('tool').attributes['wandb.attributes']).toBeUndefined();
  });

  it('is a silent no-op outside a call and with hostile input', () => {
    expect(() => setCallAttributes({ a: 1 })).not.toThrow();
    expect(() => setCallAttributes(null as unknown as Record<string, unknown>)).not.toThrow();
    trace(function hostile() {
      setCallAttributes(new Proxy({}, { ownKeys: () => { throw new Error('x'); } }));
      setCallAttributes([1, 2] as unknown as Record<string, unknown>);
    })();
    expect(tracing.span('hostile').attributes['wandb.attributes']).toBeUndefined();
  });
});
