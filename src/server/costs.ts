/**
 * Token prices and the `summary.weave.costs` of a call (SPEC §2.1, `include_costs`).
 *
 * The server's own table (the service's `default` pricing level) is shipped with it and small on
 * purpose: a handful of current models at their list prices (USD per token) on the date given.
 * Keys of `summary.usage` match a model exactly or with a dated snapshot suffix
 * (`gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`), unless the snapshot is listed by its own
 * name at a price of its own (`gpt-4o-2024-05-13`); anything else gets no entry, rather than a
 * guess. A project's own prices (`cost/create`, store/token-prices.ts) come first.
 */
import type { CallCost } from '../wire/calls.js';
import { isRecord } from '../wire/common.js';

/** One price: the server's own (`default`) or a project's (`project`). */
export interface Price {
  readonly promptTokenCost: number;
  readonly completionTokenCost: number;
  readonly promptTokenCostUnit: string;
  readonly completionTokenCostUnit: string;
  readonly providerId: string;
  readonly effectiveDate: string;
  readonly pricingLevel: 'default' | 'project';
  /** `default`, or the project's id. */
  readonly pricingLevelId: string;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** The price of a model for a call started at `startedAt` (null: not known). */
export type PriceOf = (model: string, startedAt: string | null) => Price | undefined;

const listPrice = (promptUsdPerMillion: number, completionUsdPerMillion: number, providerId: string, effectiveDate: string): Price => ({
  promptTokenCost: promptUsdPerMillion / 1_000_000,
  completionTokenCost: completionUsdPerMillion / 1_000_000,
  promptTokenCostUnit: 'USD',
  completionTokenCostUnit: 'USD',
  providerId,
  effectiveDate,
  pricingLevel: 'default',
  pricingLevelId: 'default',
  createdBy: 'system',
  createdAt: effectiveDate,
});

/** List prices, USD per million tokens converted to USD per token. */
export const PRICE_TABLE: ReadonlyMap<string, Price> = new Map<string, Price>([
  ['gpt-4o', listPrice(2.5, 10, 'openai', '2024-08-06T00:00:00.000000Z')],
  // The first gpt-4o snapshot kept its launch price: without its own entry the snapshot
  // fallback below would price it as gpt-4o, at half the service's price.
  ['gpt-4o-2024-05-13', listPrice(5, 15, 'openai', '2024-05-13T00:00:00.000000Z')],
  ['gpt-4o-mini', listPrice(0.15, 0.6, 'openai', '2024-07-18T00:00:00.000000Z')],
  ['gpt-4.1', listPrice(2, 8, 'openai', '2025-04-14T00:00:00.000000Z')],
  ['gpt-4.1-mini', listPrice(0.4, 1.6, 'openai', '2025-04-14T00:00:00.000000Z')],
  ['o3-mini', listPrice(1.1, 4.4, 'openai', '2025-01-31T00:00:00.000000Z')],
  ['claude-sonnet-4', listPrice(3, 15, 'anthropic', '2025-05-22T00:00:00.000000Z')],
  ['claude-3-5-haiku', listPrice(0.8, 4, 'anthropic', '2024-10-22T00:00:00.000000Z')],
]);

/** `-2024-08-06` (OpenAI snapshots) or `-20250514` (Anthropic snapshots) at the end of a name. */
const SNAPSHOT_SUFFIX = /-(?:\d{4}-\d{2}-\d{2}|\d{8})$/;

/** The price of `model`, by exact name or by its name without a snapshot date. */
export function findPrice(model: string): Price | undefined {
  return PRICE_TABLE.get(model) ?? PRICE_TABLE.get(model.replace(SNAPSHOT_SUFFIX, ''));
}

/** The server's own price of `model`, whenever the call started. */
export const listPriceOf: PriceOf = (model) => findPrice(model);

/**
 * `summary.weave.costs` for a call's `summary.usage`: one entry per usage key that `priceOf`
 * prices. Token counts accept both vocabularies (`prompt_tokens`/`input_tokens`,
 * `completion_tokens`/`output_tokens`; summed when a usage has both, as on the service);
 * `requests` is the usage's own count, 0 when it has none (the service reads it with
 * `JSONExtractInt`, which answers 0 for a missing key; SPEC §3's usage never holds one).
 *
 * @example
 * computeCosts({ 'gpt-4o': { prompt_tokens: 1000, completion_tokens: 10 } })['gpt-4o']?.prompt_tokens_total_cost; // 0.0025
 */
export function computeCosts(usage: unknown, priceOf: PriceOf = listPriceOf, startedAt: string | null = null): Record<string, CallCost> {
  // No prototype: a model named `__proto__` (a project may price one) is a key like any other.
  const costs: Record<string, CallCost> = Object.create(null) as Record<string, CallCost>;
  if (!isRecord(usage)) return costs;
  for (const [model, counts] of Object.entries(usage)) {
    if (!isRecord(counts)) continue;
    const price = priceOf(model, startedAt);
    if (price === undefined) continue;
    // Both vocabularies, added up where both are present, as the service does.
    const promptTokens = (count(counts.prompt_tokens) ?? 0) + (count(counts.input_tokens) ?? 0);
    const completionTokens = (count(counts.completion_tokens) ?? 0) + (count(counts.output_tokens) ?? 0);
    costs[model] = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      requests: count(counts.requests) ?? 0,
      total_tokens: count(counts.total_tokens) ?? promptTokens + completionTokens,
      prompt_token_cost: price.promptTokenCost,
      completion_token_cost: price.completionTokenCost,
      prompt_tokens_total_cost: promptTokens * price.promptTokenCost,
      completion_tokens_total_cost: completionTokens * price.completionTokenCost,
      prompt_token_cost_unit: price.promptTokenCostUnit,
      completion_token_cost_unit: price.completionTokenCostUnit,
      effective_date: price.effectiveDate,
      provider_id: price.providerId,
      pricing_level: price.pricingLevel,
      pricing_level_id: price.pricingLevelId,
      created_by: price.createdBy,
      created_at: price.createdAt,
    };
  }
  return costs;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}
