/**
 * A stand-in for a chat model: offline and deterministic, but shaped like the real thing. It
 * streams its reply token by token and reports what it used the way instrumented LLM clients do,
 * with OpenTelemetry GenAI attributes on its span. callbridge maps those to the call's
 * `attributes.model` and `summary.usage`, and the server prices the usage (gpt-4o-mini is in its
 * price table), so the demo shows tokens and cost without a network or an API key.
 */
import { trace as otel } from '@opentelemetry/api';
import { trace } from 'callbridge';

export const MODEL = 'gpt-4o-mini';

/** @typedef {{ role: 'system' | 'user', content: string }} Message */

/**
 * What this model "knows": the first rule whose pattern matches the last message writes the reply.
 * @type {Array<{ when: RegExp, reply: (text: string) => string }>}
 */
const SCRIPT = [
  {
    when: /^Plan the tool calls/,
    reply: (text) => {
      const orderId = /#(\d+)/.exec(text)?.[1] ?? 'unknown';
      const reason = /damaged|late|wrong/.exec(text)?.[0] ?? 'other';
      return `lookupOrder ${orderId}\ncheckRefundPolicy ${reason}`;
    },
  },
  {
    when: /^Write the reply/,
    reply: (text) => {
      const { lookupOrder: order, checkRefundPolicy: policy } = JSON.parse(text.slice(text.indexOf('{')));
      return (
        `I'm sorry your ${order.item} arrived damaged. Order #${order.id} qualifies for a ` +
        `${policy.refund} refund of ${order.total}; I've started it and you'll see it within ` +
        `${policy.days} business days.`
      );
    },
  },
];

/** Rough token count: one per word, as tokenizers average on English prose. */
function countTokens(/** @type {string} */ text) {
  return text.split(/\s+/).filter(Boolean).length;
}

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Stream a completion for `messages`, one token (a word and its trailing space) at a time.
 * The call stays open while the caller reads the stream; its output is the joined text.
 */
export const chat = trace(
  async function* chat(/** @type {Message[]} */ messages) {
    const span = otel.getActiveSpan();
    span?.setAttributes({ 'gen_ai.system': 'openai', 'gen_ai.request.model': MODEL });

    const last = messages.at(-1)?.content ?? '';
    const rule = SCRIPT.find(({ when }) => when.test(last));
    const reply = rule ? rule.reply(last) : "I'm not sure I can help with that.";
    const tokens = reply.match(/\S+\s*/g) ?? [];
    for (const token of tokens) {
      await sleep(2); // generation time, so the trace shows the stream taking a while
      yield token;
    }

    span?.setAttributes({
      'gen_ai.usage.input_tokens': messages.reduce((sum, m) => sum + countTokens(m.content), 0),
      'gen_ai.usage.output_tokens': tokens.length,
    });
  },
  { kind: 'llm', reduce: (chunks) => chunks.join('') },
);

/** Read a whole streamed completion into one string. */
export async function complete(/** @type {Message[]} */ messages) {
  let text = '';
  for await (const token of chat(messages)) text += token;
  return text;
}
