/**
 * The callbridge demo (`npm run demo`). A support agent answers one customer message with
 * tracing on; then everything is read back from the service:
 *   1. the system prompt is stored as a versioned object and read back,
 *   2. the agent answers inside a conversation thread (every step a traced call),
 *   3. the spans are flushed and the calls read back and printed as a tree,
 *   4. feedback is recorded on the answer and queried.
 * It runs against an embedded local server unless CALLBRIDGE_BASE_URL names a service.
 */
import { randomUUID } from 'node:crypto';
import { createClient, register, withThread } from 'callbridge';
import { createSupportAgent } from './agent.mjs';
import { connectBackend } from './backend.mjs';
import { MODEL } from './model.mjs';
import { formatTotals, formatTree } from './print-tree.mjs';

const PROJECT = process.env.CALLBRIDGE_PROJECT || 'demo/support-agent';
const PROMPT_ID = 'support-prompt';
const SYSTEM_PROMPT = 'You are the support agent of a tea shop. Be brief, kind and concrete.';
const MESSAGE = { customer: 'cust-ada', text: 'My order #1042 arrived damaged. Can I get a refund?' };

async function main() {
  const backend = await connectBackend();
  try {
    const tracing = register({ ...backend.connection, projectId: PROJECT });
    const client = createClient(backend.connection);
    try {
      console.log(`callbridge demo: project ${PROJECT} on the ${backend.description}\n`);
      await runDemo(client, tracing);
    } finally {
      await tracing.shutdown();
      await client.close();
    }
  } finally {
    await backend.close();
  }
}

/**
 * @param {import('callbridge').CallbridgeClient} client
 * @param {import('callbridge').Tracing} tracing
 */
async function runDemo(client, tracing) {
  // 1. The prompt, versioned: storing the same value again returns the same digest.
  const { digest } = await client.objCreate({
    obj: { project_id: PROJECT, object_id: PROMPT_ID, val: { text: SYSTEM_PROMPT, model: MODEL } },
  });
  const { obj: prompt } = await client.objRead({ project_id: PROJECT, object_id: PROMPT_ID, digest: 'latest' });
  console.log(`prompt    ${PROMPT_ID} v${prompt.version_index}, digest ${prompt.digest}`);

  // 2. One turn of a conversation. Every traced call inside carries the thread id.
  const threadId = `support-${randomUUID().slice(0, 8)}`;
  const agent = createSupportAgent({
    systemPrompt: /** @type {{ text: string }} */ (prompt.val).text,
    promptRef: `weave:///${PROJECT}/object/${PROMPT_ID}:${digest}`,
  });
  const reply = await withThread(threadId, () => agent.answer(MESSAGE));
  console.log(`customer  ${MESSAGE.text}`);
  console.log(`agent     ${reply}\n`);

  // 3. Deliver every span, then read the calls back (with costs priced by the service).
  await tracing.forceFlush();
  const stats = tracing.exporter.stats();
  const dropped = Object.values(stats.dropped).reduce((sum, n) => sum + n, 0);
  if (dropped > 0) throw new Error(`the exporter dropped ${dropped} span(s): ${JSON.stringify(stats.dropped)}`);
  const calls = await client.callsQuery({ project_id: PROJECT, filter: { thread_ids: [threadId] }, include_costs: true });
  const root = calls.find((call) => call.parent_id === null);
  if (root === undefined || calls.length !== stats.delivered) {
    throw new Error(`read back ${calls.length} call(s) of the ${stats.delivered} delivered, ${root ? 'with' : 'without'} a root`);
  }
  console.log(`trace ${root.trace_id}, thread ${threadId}: ${calls.length} calls`);
  for (const line of formatTree(calls)) console.log(`  ${line}`);
  console.log(`  total: ${formatTotals(calls)}`);
  // kind comes from trace(), otel_span is the span as received (the server answers it, as the
  // service does); the rest from setCallAttributes.
  const { kind, otel_span: span, ...custom } = root.attributes;
  console.log(`  ${root.op_name} attributes: ${JSON.stringify(custom)}\n`);

  // 4. Feedback on the answer, then everything recorded for it.
  const callRef = `weave:///${PROJECT}/call/${root.id}`;
  await client.feedbackCreate({ project_id: PROJECT, weave_ref: callRef, feedback_type: 'wandb.reaction.1', payload: { emoji: '👍' } });
  await client.feedbackCreate({
    project_id: PROJECT,
    weave_ref: callRef,
    feedback_type: 'wandb.note.1',
    payload: { note: 'Refund offered without asking for a return.' },
  });
  const { result: feedback } = await client.feedbackQuery({
    project_id: PROJECT,
    query: { $expr: { $eq: [{ $getField: 'weave_ref' }, { $literal: callRef }] } },
    fields: ['feedback_type', 'payload'],
  });
  for (const record of feedback) console.log(`feedback  ${record.feedback_type} ${JSON.stringify(record.payload)}`);

  console.log(`exporter  ${stats.delivered} delivered, ${dropped} dropped, ${stats.batchesSent} request(s), ${stats.retried} retried`);
}

main().then(
  () => console.log('done: everything flushed and closed'),
  (error) => {
    console.error(`demo failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
