/** The shipped price table and `summary.weave.costs` (SPEC §2.1 include_costs). */
import { describe, expect, it } from 'vitest';
import { computeCosts, findPrice, PRICE_TABLE } from '../../src/server/costs.js';

describe('findPrice', () => {
  it('matches exact names and dated snapshots, never a longer name by prefix', () => {
    expect(findPrice('gpt-4o')).toBe(PRICE_TABLE.get('gpt-4o'));
    expect(findPrice('gpt-4o-2024-08-06')).toBe(PRICE_TABLE.get('gpt-4o'));
    expect(findPrice('gpt-4o-mini')).toBe(PRICE_TABLE.get('gpt-4o-mini'));
    expect(findPrice('claude-sonnet-4-20250514')).toBe(PRICE_TABLE.get('claude-sonnet-4'));
    expect(findPrice('gpt-4o-turbo')).toBeUndefined();
    expect(findPrice('GPT-4O')).toBeUndefined();
    expect(findPrice('usage')).toBeUndefined();
  });

  it('holds USD per token prices that are small positive numbers', () => {
    for (const [model, price] of PRICE_TABLE) {
      expect(price.promptTokenCost, model).toBeGreaterThan(0);
      expect(price.promptTokenCost, model).toBeLessThan(0.001);
      expect(price.completionTokenCost, model).toBeGreaterThanOrEqual(price.promptTokenCost);
      expect(price.effectiveDate, model).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    }
  });
});

describe('computeCosts', () => {
  it('prices prompt and completion tokens from either vocabulary', () => {
    const costs = computeCosts({ 'o3-mini': { input_tokens: 1_000_000, output_tokens: 2_000_000 } });
    expect(costs['o3-mini']).toEqual({
      prompt_tokens: 1_000_000,
      completion_tokens: 2_000_000,
      // No `requests` in the usage: 0, as the service reads it.
      requests: 0,
      total_tokens: 3_000_000,
      prompt_token_cost: 1.1e-6,
      completion_token_cost: 4.4e-6,
      prompt_tokens_total_cost: expect.closeTo(1.1, 10),
      completion_tokens_total_cost: expect.closeTo(8.8, 10),
      prompt_token_cost_unit: 'USD',
      completion_token_cost_unit: 'USD',
      effective_date: PRICE_TABLE.get('o3-mini')!.effectiveDate,
      provider_id: 'openai',
      pricing_level: 'default',
      pricing_level_id: 'default',
      created_by: 'system',
      created_at: PRICE_TABLE.get('o3-mini')!.effectiveDate,
    });
  });

  it('adds the two vocabularies up where a usage has both, as the service does', () => {
    const costs = computeCosts({ 'gpt-4.1': { prompt_tokens: 10, input_tokens: 5, completion_tokens: 1, output_tokens: 2 } });
    expect(costs['gpt-4.1']).toMatchObject({ prompt_tokens: 15, completion_tokens: 3, total_tokens: 18 });
  });

  it('ignores unknown models, non-object entries and non-numeric counts', () => {
    expect(computeCosts(undefined)).toEqual({});
    expect(computeCosts([1, 2])).toEqual({});
    expect(computeCosts({ 'gpt-4.1': 'lots', unknown: { prompt_tokens: 5 } })).toEqual({});
    const costs = computeCosts({ 'gpt-4.1': { prompt_tokens: 'ten', completion_tokens: -3, total_tokens: 7 } });
    expect(costs['gpt-4.1']).toMatchObject({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 7, prompt_tokens_total_cost: 0 });
  });
});
