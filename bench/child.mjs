/**
 * One scenario run for one side, in a fresh process (so its CPU and RSS are that side's alone).
 * Usage: node bench/child.mjs <scenario> <side> '<json options>'; prints one JSON result line.
 */
import { burst } from './scenarios/burst.mjs';
import { cpu, stall } from './scenarios/paced.mjs';
import { traceOverhead } from './scenarios/trace-overhead.mjs';
import { ingest } from './scenarios/ingest.mjs';

const SCENARIOS = { burst, cpu, stall, traceOverhead, ingest };

const [scenario, side, json] = process.argv.slice(2);
const run = SCENARIOS[scenario];
if (run === undefined) {
  console.error(`unknown scenario ${scenario}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  process.exit(2);
}
const result = await run(side, JSON.parse(json ?? '{}'));
process.stdout.write(`${JSON.stringify({ scenario, side, ...result })}\n`);
// An exporter that keeps a socket or timer alive must not hang the bench.
process.exit(0);
