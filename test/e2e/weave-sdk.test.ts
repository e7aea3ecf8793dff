/**
 * W&B Weave's own TypeScript SDK (npm `weave`, a dev dependency) against the local server: a
 * session its users would write (test/fixtures/weave-sdk-session.mjs) runs in a child process
 * with the SDK's own variables pointing at the server, and must work as it does against the
 * hosted service; then what the server stored is read back with callbridge's client. The
 * session also traces a call with callbridge, which the Weave SDK reads back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type CallbridgeClient } from '../../src/client/index.js';
import type { Call } from '../../src/wire/calls.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { cleanEnv, ensureBuilt, runNode, type NodeRun } from './node-process.js';

const PROJECT = 'alice/interop';
const WEAVE_KEY = 'weave-sdk-key';

interface SessionOutput {
  outerResult: string;
  failure: string;
  answers: string[];
  evaluationSummary: Record<string, unknown>;
  datasetRef: string;
  rowBack: unknown;
  promptBack: { className: string; text: string };
  callbridgeCall: { inputs: unknown; output: unknown; exception: unknown } | undefined;
}

let server: TestServer;
let client: CallbridgeClient;
let run: NodeRun;
let session: SessionOutput;
let calls: Call[];

/** The calls of the op whose ref names `name` (`weave:///alice/interop/op/<name>:<digest>`). */
function callsOf(name: string): Call[] {
  return calls.filter((call) => call.op_name.startsWith(`weave:///${PROJECT}/op/${name}:`));
}

beforeAll(async () => {
  ensureBuilt();
  // The Weave SDK sends its API key as the password of user `api`.
  server = await startTestServer({ users: [{ username: 'api', password: WEAVE_KEY, entities: ['alice'] }] });
  client = createClient({ baseUrl: server.url, username: server.username, password: server.password });
  run = await runNode(['test/fixtures/weave-sdk-session.mjs'], {
    env: cleanEnv({ WF_TRACE_SERVER_URL: server.url, WANDB_API_KEY: WEAVE_KEY, WEAVE_PROJECT: PROJECT }),
    timeoutMs: 60_000,
  });
  const lastLine = run.stdout.trim().split('\n').at(-1) ?? '';
  session = lastLine.startsWith('{') ? (JSON.parse(lastLine) as SessionOutput) : ({} as SessionOutput);
  calls = await client.callsQuery({ project_id: PROJECT });
}, 120_000);

afterAll(async () => {
  await client?.close();
  await server?.close();
});

describe("W&B Weave's TypeScript SDK against the local server", () => {
  it('runs the whole session and exits by itself', () => {
    expect(run.timedOut).toBe(false);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(session.outerResult).toBe('hi:42');
    expect(session.failure).toBe('boom');
  });

  it('stores nested ops as one trace, with inputs, output, errors and a display name set later', () => {
    const [outer] = callsOf('outer');
    const [inner] = callsOf('inner');
    expect(outer).toMatchObject({ parent_id: null, display_name: 'outer, renamed', inputs: { arg0: 'hi', arg1: 21 }, output: 'hi:42', exception: null });
    expect(inner).toMatchObject({ parent_id: outer!.id, trace_id: outer!.trace_id, inputs: { arg0: 21 }, output: { doubled: 42 } });
    expect(outer!.ended_at! >= inner!.ended_at!).toBe(true);
    const [failing] = callsOf('failing');
    expect(failing!.exception).toBe('boom');
    expect(failing!.summary).toMatchObject({ weave: { status: 'error' } });
    expect(outer!.summary).toMatchObject({ weave: { status: 'success' } });
  });

  it('keeps the ops themselves: their refs resolve to the op objects and their code', async () => {
    const [outer] = callsOf('outer');
    const { vals } = await client.refsReadBatch({ refs: [outer!.op_name] });
    const op = vals[0] as { _type: string; files: Record<string, string> };
    expect(op._type).toBe('CustomWeaveType');
    const [fileName, digest] = Object.entries(op.files)[0]!;
    const code = Buffer.from(await client.fileContent({ project_id: PROJECT, digest })).toString('utf8');
    expect(fileName).toBe('obj.py');
    expect(code).toContain('outer');
  });

  it('runs an evaluation whose stored call holds the summary the SDK returned', () => {
    const [evaluate] = callsOf('Evaluation.evaluate');
    expect(evaluate!.output).toEqual(session.evaluationSummary);
    expect(session.evaluationSummary).toMatchObject({ exact: { ok: { true_count: 2, true_fraction: 1 } }, model_output: { mean: 3.5 } });
    const children = calls.filter((call) => call.parent_id === evaluate!.id);
    expect(children.length).toBe(2);
    // Each row's prediction and score are calls of their own, under the row's call.
    for (const row of children) {
      const grandchildren = calls.filter((call) => call.parent_id === row.id).map((call) => call.op_name.split('/').at(-1)!.split(':')[0]);
      expect(grandchildren.sort()).toEqual(['exact', 'model']);
    }
  });

  it("reads back a published dataset's rows and a prompt through the SDK", () => {
    expect(session.datasetRef).toMatch(new RegExp(`^weave:///${PROJECT}/object/arith:[A-Za-z0-9]{43}$`));
    expect(session.rowBack).toEqual({ a: 2.5, q: 'b' });
    expect(session.promptBack).toEqual({ className: 'StringPrompt', text: 'Hello Ada' });
  });

  it('stores an image as a file, byte for byte', async () => {
    const [drawing] = callsOf('drawing');
    const output = drawing!.output as { _type: string; files: Record<string, string> };
    expect(output._type).toBe('CustomWeaveType');
    const png = await client.fileContent({ project_id: PROJECT, digest: output.files['image.png']! });
    expect(Buffer.from(png).subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    expect(png.byteLength).toBe(70);
  });

  it("keeps withAttributes' attributes beside the SDK's own", () => {
    const [tagged] = callsOf('tagged');
    expect(tagged!.attributes).toMatchObject({ env: 'ci', nested: { level: 1 }, weave: { source: 'js-sdk' } });
  });

  it("stores an evaluation logger's score as runnable feedback on its call", async () => {
    const { result } = await client.feedbackQuery({ project_id: PROJECT });
    expect(result).toHaveLength(1);
    const [score] = result as Array<{ feedback_type: string; payload: unknown; weave_ref: string }>;
    expect(score).toMatchObject({ feedback_type: 'wandb.runnable.accuracy', payload: { output: 0.75 } });
    const scoredId = score!.weave_ref.split('/').at(-1);
    expect(calls.some((call) => call.id === scoredId)).toBe(true);
  });

  it("records wrapOpenAI's calls with their usage, which include_costs prices", async () => {
    expect(session.answers).toEqual(['Hi!', 'Hello']);
    const [plain, streamed] = callsOf('openai.chat.completions.create');
    const model = 'gpt-4o-mini-2024-07-18';
    expect(plain!.summary).toMatchObject({ usage: { [model]: { requests: 1, prompt_tokens: 11, completion_tokens: 3 } } });
    expect(streamed!.summary).toMatchObject({ usage: { [model]: { requests: 1, prompt_tokens: 10, completion_tokens: 2 } } });
    expect(streamed!.output).toMatchObject({ choices: [{ message: { content: 'Hello' } }] });
    const [priced] = await client.callsQuery({ project_id: PROJECT, filter: { call_ids: [plain!.id] }, include_costs: true });
    const cost = (priced!.summary as { weave: { costs: Record<string, { prompt_tokens_total_cost: number; completion_tokens_total_cost: number }> } }).weave.costs[model]!;
    // The list price of gpt-4o-mini: $0.15 and $0.60 per million tokens.
    expect(cost.prompt_tokens_total_cost).toBeCloseTo(11 * 0.15e-6, 12);
    expect(cost.completion_tokens_total_cost).toBeCloseTo(3 * 0.6e-6, 12);
  });

  it('reads a call that callbridge traced in the same process', () => {
    expect(session.callbridgeCall).toEqual({ inputs: { text: 'the quick brown fox', maxWords: 2 }, output: 'the quick', exception: null });
  });
});
