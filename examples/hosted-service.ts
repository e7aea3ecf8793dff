/**
 * Sending calls to the hosted service (W&B Weave's trace server) with an API key:
 *
 *   WANDB_API_KEY=... CALLBRIDGE_PROJECT=my-team/my-project node examples/out/hosted-service.js
 *
 * (compiled as README "Examples" shows)
 *
 * WF_TRACE_SERVER_URL overrides the service URL (the default below is the hosted one). The key is
 * sent as the password of user `api`, which is how the service takes W&B API keys.
 */
import { CallbridgeHttpError, createClient, register, trace } from 'callbridge';

// `||`, not `??`: an empty variable means "not set" here, as it does for register().
const baseUrl = process.env.WF_TRACE_SERVER_URL || 'https://trace.wandb.ai';
const apiKey = process.env.WANDB_API_KEY;
const projectId = process.env.CALLBRIDGE_PROJECT; // "entity/project": your W&B team (or user) and project
if (!apiKey || !projectId) {
  console.error('Set WANDB_API_KEY and CALLBRIDGE_PROJECT=<entity>/<project> first.');
  process.exit(1);
}

const tracing = register({ baseUrl, apiKey, projectId });

const summarize = trace(
  async function summarize(text: string): Promise<string> {
    return text.split('. ')[0] ?? text;
  },
  { kind: 'llm' },
);
await summarize('Tracing works. This sentence is dropped.');

// Deliver now rather than at exit, to report a refused key or an unreachable service clearly and
// read the call back.
await tracing.forceFlush();
const { delivered, dropped, queued, inFlight } = tracing.exporter.stats();
if (dropped.auth > 0) {
  console.error(`${baseUrl} refused the API key for ${projectId}: check WANDB_API_KEY and the entity`);
  process.exitCode = 1;
} else if (delivered === 0) {
  // Still waiting (the service cannot be reached: forceFlush() gives up waiting after
  // shutdownTimeoutMs, the messages above say why) or dropped for another reason.
  console.error(`nothing delivered to ${baseUrl} (${queued + inFlight} still waiting, dropped: ${JSON.stringify(dropped)})`);
  process.exitCode = 1;
} else {
  const client = createClient({ baseUrl, apiKey });
  try {
    const [latest] = await client.callsQuery({
      project_id: projectId,
      filter: { trace_roots_only: true },
      sort_by: [{ field: 'started_at', direction: 'desc' }],
      limit: 1,
    });
    console.log(`${delivered} call(s) delivered; latest: ${latest?.op_name} (${latest?.summary.weave.status})`);
  } catch (error) {
    if (!(error instanceof CallbridgeHttpError)) throw error;
    console.error(`delivered, but reading it back failed: ${error.message}`);
    process.exitCode = 1;
  } finally {
    await client.close();
  }
}
await tracing.shutdown();
