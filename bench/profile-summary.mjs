/**
 * Where a CPU profile's time went: the top functions by self time and by inclusive time.
 * Usage: node bench/profile-summary.mjs <file.cpuprofile> [topSelf=25] [topInclusive=40]
 * (profiles come from BENCH_PROFILE=1 node bench/run.mjs ..., or node --cpu-prof yourself).
 */
import { readFileSync } from 'node:fs';

const [file, topSelfArg = '25', topInclusiveArg = '40'] = process.argv.slice(2);
if (file === undefined) {
  console.error('usage: node bench/profile-summary.mjs <file.cpuprofile> [topSelf] [topInclusive]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const parentOf = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

// Time per sampled node: each sample's delta belongs to the node it hit.
const timeOfNode = new Map();
profile.samples.forEach((id, i) => timeOfNode.set(id, (timeOfNode.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...timeOfNode.values()].reduce((a, b) => a + b, 0);

const label = ({ callFrame: f }) =>
  `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/node_modules\//, '').replace(/^.*\//, '')}:${f.lineNumber + 1}`;

const self = new Map();
const inclusive = new Map();
for (const [id, time] of timeOfNode) {
  const name = label(nodes.get(id));
  self.set(name, (self.get(name) ?? 0) + time);
  // Count a function once per stack even when it recurses.
  const seen = new Set();
  for (let at = id; at !== undefined; at = parentOf.get(at)) {
    const frame = label(nodes.get(at));
    if (seen.has(frame)) continue;
    seen.add(frame);
    inclusive.set(frame, (inclusive.get(frame) ?? 0) + time);
  }
}

const top = (map, n) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, time]) => `${(time / 1000).toFixed(0).padStart(7)} ms ${((100 * time) / total).toFixed(1).padStart(5)} %  ${name}`)
    .join('\n');

console.log(`total ${(total / 1000).toFixed(0)} ms (idle included)\n\n-- self --\n${top(self, Number(topSelfArg))}\n\n-- inclusive --\n${top(inclusive, Number(topInclusiveArg))}`);
