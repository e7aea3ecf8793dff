/**
 * The support agent: plans which tools to call, calls them (retrying a timed-out one), and writes
 * the reply. Every step is a traced function, so one message becomes one tree of calls.
 */
import { setCallAttributes, trace } from 'callbridge';
import { complete } from './model.mjs';
import { checkRefundPolicy, lookupOrder } from './tools.mjs';

/** @typedef {{ customer: string, text: string }} CustomerMessage */

/** The tools by the name the plan uses. */
const TOOLS = new Map(Object.entries({ lookupOrder, checkRefundPolicy }));
const MAX_ATTEMPTS = 3;

/**
 * An agent answering with `systemPrompt`; `promptRef` (the prompt's stored object) is recorded on
 * every answer so a call can be traced back to the prompt version that produced it.
 * @param {{ systemPrompt: string, promptRef: string }} options
 */
export function createSupportAgent({ systemPrompt, promptRef }) {
  const plan = trace(async function plan(/** @type {string} */ question) {
    const text = await complete([
      { role: 'system', content: systemPrompt },
      { role: 'user', content: `Plan the tool calls for: ${question} Tools: ${[...TOOLS.keys()].join(', ')}` },
    ]);
    return text.split('\n').map((line) => {
      const [tool = '', argument = ''] = line.split(' ');
      return { tool, argument };
    });
  });

  const writeReply = trace(async function writeReply(/** @type {string} */ question, /** @type {object} */ facts) {
    return complete([
      { role: 'system', content: systemPrompt },
      { role: 'user', content: `Write the reply to: ${question} Facts: ${JSON.stringify(facts)}` },
    ]);
  });

  /** Answer one customer message. */
  const answer = trace(
    async function answer(/** @type {CustomerMessage} */ message) {
      setCallAttributes({ customer: message.customer, channel: 'chat', prompt: promptRef });
      /** @type {Record<string, unknown>} */
      const facts = {};
      for (const step of await plan(message.text)) {
        const tool = TOOLS.get(step.tool);
        if (tool === undefined) throw new Error(`the plan names an unknown tool: ${step.tool}`);
        facts[step.tool] = await withRetry(() => tool(step.argument));
      }
      return writeReply(message.text, facts);
    },
    { kind: 'agent' },
  );

  return { answer };
}

/**
 * Run `attempt` until it succeeds, at most MAX_ATTEMPTS times, retrying only errors that say
 * they are retryable. Not traced itself: each attempt is its own call under the caller.
 * @param {() => Promise<unknown>} attempt
 */
async function withRetry(attempt) {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      const retryable = error instanceof Error && 'retryable' in error && error.retryable === true;
      if (!retryable || tries >= MAX_ATTEMPTS) throw error;
    }
  }
}
