/**
 * Calls read back from the service, printed as the tree they form: status, kind, duration, the
 * error of a failed call, and the token usage and cost of model calls.
 */

/** @typedef {Awaited<ReturnType<import('callbridge').CallbridgeClient['callsQuery']>>[number]} Call */
/** @typedef {{ input_tokens?: number, output_tokens?: number }} Usage */

const NAME_WIDTH = 32;

/**
 * One line per call, children indented under their parent in the order they started.
 * @param {Call[]} calls  as `callsQuery` returns them (ordered by start time)
 * @returns {string[]}
 */
export function formatTree(calls) {
  const ids = new Set(calls.map((call) => call.id));
  /** @type {Map<string | null, Call[]>} */
  const children = new Map();
  for (const call of calls) {
    const parent = call.parent_id !== null && ids.has(call.parent_id) ? call.parent_id : null;
    children.set(parent, [...(children.get(parent) ?? []), call]);
  }
  /** @type {string[]} */
  const lines = [];
  const visit = (/** @type {string | null} */ parent, /** @type {number} */ depth) => {
    for (const call of [...(children.get(parent) ?? [])].sort(byStartThenEnd)) {
      lines.push(formatCall(call, depth));
      visit(call.id, depth + 1);
    }
  };
  visit(null, 0);
  return lines;
}

/**
 * The OpenTelemetry SDK stamps a span's start with `Date.now()` (whole milliseconds) and its end
 * with the start plus a sub-millisecond duration, so a call and the sibling that began right after
 * it can share a start time; the service then orders them by id. Among calls that started in the
 * same millisecond, the one that ended first came first.
 */
function byStartThenEnd(/** @type {Call} */ a, /** @type {Call} */ b) {
  if (a.started_at !== b.started_at) return a.started_at < b.started_at ? -1 : 1;
  const aEnded = a.ended_at ?? '';
  const bEnded = b.ended_at ?? '';
  return aEnded === bEnded ? 0 : aEnded < bEnded ? -1 : 1;
}

/** Sum of the token usage and cost of every call, e.g. `81 in / 44 out tokens, $0.000039`. */
export function formatTotals(/** @type {Call[]} */ calls) {
  let input = 0;
  let output = 0;
  let cost = 0;
  for (const call of calls) {
    for (const usage of Object.values(usageOf(call))) {
      input += usage.input_tokens ?? 0;
      output += usage.output_tokens ?? 0;
    }
    cost += costOf(call);
  }
  return `${input} in / ${output} out tokens, $${cost.toFixed(6)}`;
}

function formatCall(/** @type {Call} */ call, /** @type {number} */ depth) {
  const failed = call.exception !== null;
  const kind = typeof call.attributes.kind === 'string' ? ` (${call.attributes.kind})` : '';
  const name = `${'  '.repeat(depth)}${failed ? '✗' : '✓'} ${call.op_name}${kind}`.padEnd(NAME_WIDTH);
  const latency = call.summary.weave.latency_ms;
  const duration = `${latency === undefined ? '?' : latency} ms`.padStart(8);
  return `${name}${duration}  ${failed ? `error: ${call.exception}` : describeUsage(call)}`.trimEnd();
}

/** `gpt-4o-mini 41 in / 4 out tokens $0.000009`, or '' for a call without usage. */
function describeUsage(/** @type {Call} */ call) {
  const parts = Object.entries(usageOf(call)).map(
    ([model, usage]) => `${model} ${usage.input_tokens ?? 0} in / ${usage.output_tokens ?? 0} out tokens`,
  );
  if (parts.length === 0) return '';
  const cost = costOf(call);
  return cost > 0 ? `${parts.join(', ')}  $${cost.toFixed(6)}` : parts.join(', ');
}

/** `summary.usage`: `{<model>: counts}` (the mapping writes it from the span's `gen_ai.usage.*`). */
function usageOf(/** @type {Call} */ call) {
  const usage = call.summary.usage;
  return typeof usage === 'object' && usage !== null ? /** @type {Record<string, Usage>} */ (usage) : {};
}

/** The call's total cost in USD, from `summary.weave.costs` (read with `include_costs: true`). */
function costOf(/** @type {Call} */ call) {
  let total = 0;
  for (const cost of Object.values(call.summary.weave.costs ?? {})) {
    total += cost.prompt_tokens_total_cost + cost.completion_tokens_total_cost;
  }
  return total;
}
