/**
 * Token prices and the `summary.weave.costs` of a call (SPEC §2.1, `include_costs`).
 *
 * The table is shipped with the server and small on purpose: a handful of current models at their
 * list prices (USD per token) on the date given. Keys of `summary.usage` match a model exactly or
 * with a dated snapshot suffix (`gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`); anything else
 * gets no entry, rather than a guess.
 */
import type { CallCost } from '../wire/calls.js';
import { isRecord } from '../wire/common.js';

interface Price {
  readonly promptTokenCost: number;
  readonly completionTokenCost: number;
  readonly providerId: string;
  readonly effectiveDate: string;
}

const perMillion = (usd: number): number => usd / 1_000_000;

/** List prices, USD per million tokens converted to USD per token. */
export const PRICE_TABLE: ReadonlyMap<string, Price> = new Map<string, Price>([
  ['gpt-4o', { promptTokenCost: perMillion(2.5), completionTokenCost: perMillion(10), providerId: 'openai', effectiveDate: '2024-08-06T00:00:00.000000Z' }],
  ['gpt-4o-mini', { promptTokenCost: perMillion(0.15), completionTokenCost: perMillion(0.6), providerId: 'openai', effectiveDate: '2024-07-18T00:00:00.000000Z' }],
  ['gpt-4.1', { promptTokenCost: perMillion(2), completionTokenCost: perMillion(8), providerId: 'openai', effectiveDate: '2025-04-14T00:00:00.000000Z' }],
  ['gpt-4.1-mini', { promptTokenCost: perMillion(0.4), completionTokenCost: perMillion(1.6), providerId: 'openai', effectiveDate: '2025-04-14T00:00:00.000000Z' }],
  ['o3-mini', { promptTokenCost: perMillion(1.1), completionTokenCost: perMillion(4.4), providerId: 'openai', effectiveDate: '2025-01-31T00:00:00.000000Z' }],
  ['claude-sonnet-4', { promptTokenCost: perMillion(3), completionTokenCost: perMillion(15), providerId: 'anthropic', effectiveDate: '2025-05-22T00:00:00.000000Z' }],
  ['claude-3-5-haiku', { promptTokenCost: perMillion(0.8), completionTokenCost: perMillion(4), providerId: 'anthropic', effectiveDate: '2024-10-22T00:00:00.000000Z' }],
]);

/** `-2024-08-06` (OpenAI snapshots) or `-20250514` (Anthropic snapshots) at the end of a name. */
const SNAPSHOT_SUFFIX = /-(?:\d{4}-\d{2}-\d{2}|\d{8})$/;

/** The price of `model`, by exact name or by its name without a snapshot date. */
export function findPrice(model: string): Price | undefined {
  return PRICE_TABLE.get(model) ?? PRICE_TABLE.get(model.replace(SNAPSHOT_SUFFIX, ''));
}

/**
 * `summary.weave.costs` for a call's `summary.usage`: one entry per usage key that names a known
 * model. Token counts accept both vocabularies (`prompt_tokens`/`input_tokens`,
 * `completion_tokens`/`output_tokens`); `requests` defaults to 1 (a usage entry is one request
 * unless the SDK counted more).
 *
 * @example
 * computeCosts({ 'gpt-4o': { prompt_tokens: 1000, completion_tokens: 10 } })['gpt-4o']?.prompt_tokens_total_cost; // 0.0025
 */
export function computeCosts(usage: unknown): Record<string, CallCost> {
  const costs: Record<string, CallCost> = {};
  if (!isRecord(usage)) return costs;
  for (const [model, counts] of Object.entries(usage)) {
    const price = findPrice(model);
    if (price === undefined || !isRecord(counts)) continue;
    const promptTokens = count(counts.prompt_tokens) ?? count(counts.input_tokens) ?? 0;
    const completionTokens = count(counts.completion_tokens) ?? count(counts.output_tokens) ?? 0;
    costs[model] = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      requests: count(counts.requests) ?? 1,
      total_tokens: count(counts.total_tokens) ?? promptTokens + completionTokens,
      prompt_token_cost: price.promptTokenCost,
      completion_token_cost: price.completionTokenCost,
      prompt_tokens_total_cost: promptTokens * price.promptTokenCost,
      completion_tokens_total_cost: completionTokens * price.completionTokenCost,
      prompt_token_cost_unit: 'USD',
      completion_token_cost_unit: 'USD',
      effective_date: price.effectiveDate,
      provider_id: price.providerId,
    };
  }
  return costs;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}
