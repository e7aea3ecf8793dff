/**
 * `npm run demo` as a new user runs it: `node examples/demo/run.mjs` against the built package,
 * in a child process that must exit by itself (nothing left running) with the trace printed.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { cleanEnv, ensureBuilt, runNode, type NodeRun } from './node-process.js';

const DEMO = 'examples/demo/run.mjs';

// The SPEC §2.2 digest of the demo's prompt value, worked out independently with Python:
// base64url(sha256(json.dumps({"model": "gpt-4o-mini", "text": ...}, sort_keys=True))), - -> X, _ -> Y.
const PROMPT_DIGEST = 'c4mHIjOVk6b2uhMd42oBzEktWbRFyspGNcv24j9hUqM';

/**
 * The whole output with what legitimately changes between runs replaced: port, temp dir, trace
 * and thread ids, durations. Everything else (tree, usage, costs, digest, feedback) is fixed.
 */
function normalize(stdout: string): string {
  return stdout
    .replace(/http:\/\/127\.0\.0\.1:\d+/g, 'http://127.0.0.1:PORT')
    .replace(/SQLite in [^)]+\)/, 'SQLite in TMPDIR)')
    .replace(/trace [0-9a-f]{32}/, 'trace TRACE_ID')
    .replace(/support-[0-9a-f]{8}/, 'support-THREAD')
    .replace(/^( +[✓✗] .*?) +\d+ ms/gm, '$1  N ms');
}

const EXPECTED_EMBEDDED = `callbridge demo: project demo/support-agent on the embedded server at http://127.0.0.1:PORT (SQLite in TMPDIR)

prompt    support-prompt v0, digest ${PROMPT_DIGEST}
customer  My order #1042 arrived damaged. Can I get a refund?
agent     I'm sorry your ceramic teapot arrived damaged. Order #1042 qualifies for a full refund of $38.00; I've started it and you'll see it within 5 business days.

trace TRACE_ID, thread support-THREAD: 8 calls
  ✓ answer (agent)  N ms
    ✓ plan  N ms
      ✓ chat (llm)  N ms  gpt-4o-mini 32 in / 4 out tokens  $0.000007
    ✗ lookupOrder (tool)  N ms  error: order service did not answer within 2000 ms
    ✓ lookupOrder (tool)  N ms
    ✓ checkRefundPolicy (tool)  N ms
    ✓ writeReply  N ms
      ✓ chat (llm)  N ms  gpt-4o-mini 31 in / 27 out tokens  $0.000021
  total: 63 in / 31 out tokens, $0.000028
  answer attributes: {"customer":"cust-ada","channel":"chat","prompt":"weave:///demo/support-agent/object/support-prompt:${PROMPT_DIGEST}"}

feedback  wandb.reaction.1 {"emoji":"👍"}
feedback  wandb.note.1 {"note":"Refund offered without asking for a return."}
exporter  8 delivered, 0 dropped, 1 request(s), 0 retried
done: everything flushed and closed
`;

beforeAll(() => ensureBuilt(), 120_000);

describe('the demo on its embedded server', () => {
  let run: NodeRun;
  beforeAll(async () => {
    run = await runNode(['--enable-source-maps', DEMO]);
  }, 30_000);

  it('exits 0 by itself, with nothing on stderr', () => {
    expect(run.timedOut, `the demo did not exit by itself; output so far:\n${run.stdout}${run.stderr}`).toBe(false);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });

  it('prints the call tree with the failed attempt, token usage and costs', () => {
    const lines = run.stdout.split('\n');
    const tree = lines.filter((line) => /^ +[✓✗] /.test(line)).map((line) => line.replace(/ +\d+ ms.*$/, ''));
    expect(tree).toEqual([
      '  ✓ answer (agent)',
      '    ✓ plan',
      '      ✓ chat (llm)',
      '    ✗ lookupOrder (tool)',
      '    ✓ lookupOrder (tool)',
      '    ✓ checkRefundPolicy (tool)',
      '    ✓ writeReply',
      '      ✓ chat (llm)',
    ]);
    expect(run.stdout).toMatch(/✗ lookupOrder \(tool\) +\d+ ms {2}error: order service did not answer within 2000 ms\n/);
    expect(run.stdout).toMatch(/✓ chat \(llm\) +\d+ ms {2}gpt-4o-mini 31 in \/ 27 out tokens {2}\$0\.000021\n/);
  });

  it('prints the stored prompt digest, the feedback and the exporter stats', () => {
    expect(run.stdout).toContain(`prompt    support-prompt v0, digest ${PROMPT_DIGEST}\n`);
    expect(run.stdout).toContain('feedback  wandb.reaction.1 {"emoji":"👍"}\n');
    expect(run.stdout).toContain('exporter  8 delivered, 0 dropped');
  });

  it('prints the same output on every run, ids and durations aside', () => {
    expect(normalize(run.stdout)).toBe(EXPECTED_EMBEDDED);
  });

  it('removes its temporary database', () => {
    const dir = /SQLite in ([^)]+)\)/.exec(run.stdout)?.[1];
    expect(dir).toBeDefined();
    expect(existsSync(dir!)).toBe(false);
  });
});

describe('the demo against a running service (CALLBRIDGE_BASE_URL)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it('uses the service, its credentials and CALLBRIDGE_PROJECT, and can run again on the same data', async () => {
    const env = cleanEnv({
      CALLBRIDGE_BASE_URL: server.url,
      CALLBRIDGE_USERNAME: server.username,
      CALLBRIDGE_PASSWORD: server.password,
      CALLBRIDGE_PROJECT: 'acme/support',
    });
    for (let round = 1; round <= 2; round++) {
      const run = await runNode([DEMO], { env });
      expect(run.timedOut).toBe(false);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`callbridge demo: project acme/support on the service at ${server.url}\n`);
      // The same prompt again is the same version; each run reads back only its own thread.
      expect(run.stdout).toContain(`support-prompt v0, digest ${PROMPT_DIGEST}`);
      expect(run.stdout).toMatch(/thread support-[0-9a-f]{8}: 8 calls\n/);
    }
  }, 40_000);

  it('exits 1 with one clear line when the service refuses the credentials', async () => {
    const env = cleanEnv({ CALLBRIDGE_BASE_URL: server.url, CALLBRIDGE_USERNAME: 'dev', CALLBRIDGE_PASSWORD: 'wrong' });
    const run = await runNode([DEMO], { env });
    expect(run.timedOut).toBe(false);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^demo failed: .*\/obj\/create rejected the credentials \(401\) as user "dev"/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('the demo’s tree (examples/demo/print-tree.mjs)', () => {
  const call = (id: string, parentId: string | null, startedAt: string, endedAt: string) => ({
    id,
    parent_id: parentId,
    op_name: id,
    started_at: startedAt,
    ended_at: endedAt,
    exception: null,
    attributes: {},
    summary: { weave: { latency_ms: 1 } },
  });

  it('puts siblings that started in the same millisecond in the order they ended, whatever order the service gave', async () => {
    // A plain JavaScript example without declarations: imported by a path TypeScript does not resolve.
    const printTree = '../../examples/demo/print-tree.mjs';
    const { formatTree } = (await import(printTree)) as {
      formatTree: (calls: unknown[]) => string[];
    };
    // The SDK stamps starts with Date.now(): `check` began and ended within the millisecond `reply` began in.
    const calls = [
      call('root', null, '2026-11-24T05:03:06.556000Z', '2026-11-24T05:03:06.648222Z'),
      call('reply', 'root', '2026-11-24T05:03:06.582000Z', '2026-11-24T05:03:06.648386Z'),
      call('chat', 'reply', '2026-11-24T05:03:06.582000Z', '2026-11-24T05:03:06.648076Z'),
      call('check', 'root', '2026-11-24T05:03:06.582000Z', '2026-11-24T05:03:06.582389Z'),
      call('plan', 'root', '2026-11-24T05:03:06.558000Z', '2026-11-24T05:03:06.573379Z'),
    ];
    expect(formatTree(calls).map((line) => line.trim().split(/\s+/)[1])).toEqual(['root', 'plan', 'check', 'reply', 'chat']);
  });
});
