/**
 * A project's token prices on SQLite: `cost/create`, `cost/query` and `cost/purge` as the hosted
 * service serves them, and the price in effect for a call's model (`priceOf`), which the calls
 * store uses for `summary.weave.costs`.
 *
 * Which price a call gets, as the service ranks them: prices in effect when the call started
 * (`effective_date <= started_at`) before later ones; among those a project's own before the
 * server's list price (`../costs.ts`); then the latest `effective_date`. A project price names a
 * model exactly (`gpt-4o-2024-08-06` is not `gpt-4o`); the list prices also match dated snapshots.
 *
 * Where the service is silent or differs, we chose: a price must be a finite number of at least 0
 * (the service stores any float); `cost/query` reads the request's project only, also when a
 * `query` is given (the service's query then reaches every project's prices).
 */
import { BadRequestError } from '../errors.js';
import { uuidv7 } from '../ids.js';
import { quote } from '../quote.js';
import { nowInstant, parseTimestamp } from '../timestamps.js';
import { findPrice, type Price, type PriceOf } from '../costs.js';
import type { FieldTable } from '../query/fields.js';
import { purgeIds } from '../query/purge-ids.js';
import {
  COST_QUERY_OUTPUT_FIELDS,
  MAX_COST_NAME_CHARS,
  type CostCreateReq,
  type CostQueryOutput,
  type CostQueryReq,
  type CostCreateRes,
} from '../../wire/costs.js';
import type { Query } from '../../wire/common.js';
import { listQueryTail } from './content-common.js';
import type { SqliteDatabase } from './sqlite.js';
import { StatementCache } from './statement-cache.js';

/** What `$expr`, `sort_by` and `fields` may name: the service's `llm_token_prices` columns. */
const TOKEN_PRICE_FIELDS: FieldTable = {
  id: { sql: 'id', type: 'text' },
  llm_id: { sql: 'llm_id', type: 'text' },
  provider_id: { sql: 'provider_id', type: 'text' },
  effective_date: { sql: 'effective_date', type: 'datetime' },
  prompt_token_cost: { sql: 'prompt_token_cost', type: 'number' },
  completion_token_cost: { sql: 'completion_token_cost', type: 'number' },
  prompt_token_cost_unit: { sql: 'prompt_token_cost_unit', type: 'text' },
  completion_token_cost_unit: { sql: 'completion_token_cost_unit', type: 'text' },
  pricing_level: { sql: "'project'", type: 'text' },
  pricing_level_id: { sql: 'project_id', type: 'text' },
  created_by: { sql: 'created_by', type: 'text' },
  created_at: { sql: 'created_at', type: 'datetime' },
};

const PURGE_SHAPE =
  'Can only purge costs by id: {"$eq": [{"$getField": "id"}, {"$literal": "<id>"}]}, an "$or" of those, or "$in" a list of ids';

/** A stored price row. */
interface PriceRow {
  readonly project_id: string;
  readonly id: string;
  readonly llm_id: string;
  readonly provider_id: string;
  readonly effective_date: string;
  readonly prompt_token_cost: number;
  readonly completion_token_cost: number;
  readonly prompt_token_cost_unit: string;
  readonly completion_token_cost_unit: string;
  readonly created_by: string;
  readonly created_at: string;
}

export interface TokenPriceStore {
  /** Store the prices of `request.costs` for user `wbUserId`; answers `[id, llm_id]` of each. */
  create(request: CostCreateReq, wbUserId: string): CostCreateRes;
  /** A project's prices, each with the members of CostQueryOutput (null where `fields` leaves one out). */
  query(request: CostQueryReq): CostQueryOutput[];
  /** Delete the prices whose ids `query` names; answers how many went. */
  purge(projectId: string, query: Query): number;
  /**
   * How to price a model for calls of `projectId`, read as needed while one answer is written
   * (a project without prices of its own gets the list prices with no read at all).
   */
  priceOf(projectId: string): PriceOf;
}

/**
 * Build the token price store on an open database whose migrations are applied.
 *
 * @example
 * const prices = createTokenPriceStore(db);
 * prices.create({ project_id: 'acme/demo', costs: { 'my-model': { prompt_token_cost: 1e-6, completion_token_cost: 2e-6 } } }, 'dev');
 */
export function createTokenPriceStore(db: SqliteDatabase): TokenPriceStore {
  const insert = db.prepare(
    `INSERT INTO token_prices (project_id, id, llm_id, provider_id, effective_date, prompt_token_cost, completion_token_cost,
       prompt_token_cost_unit, completion_token_cost_unit, created_by, created_at)
     VALUES (@project_id, @id, @llm_id, @provider_id, @effective_date, @prompt_token_cost, @completion_token_cost,
       @prompt_token_cost_unit, @completion_token_cost_unit, @created_by, @created_at)`,
  );
  const insertAll = db.transaction((rows: readonly PriceRow[]) => {
    for (const row of rows) insert.run(row);
  });
  const anyPrice = db.prepare<[string], { one: number }>('SELECT 1 AS one FROM token_prices WHERE project_id = ? LIMIT 1');
  // Ties on effective_date go to the price stored last.
  const inEffectAt = db.prepare<[string, string, string], PriceRow>(
    `SELECT * FROM token_prices WHERE project_id = ? AND llm_id = ? AND effective_date <= ?
     ORDER BY effective_date DESC, rowid DESC LIMIT 1`,
  );
  const latest = db.prepare<[string, string], PriceRow>(
    'SELECT * FROM token_prices WHERE project_id = ? AND llm_id = ? ORDER BY effective_date DESC, rowid DESC LIMIT 1',
  );
  const deleteByIds = db.prepare<[string, string]>('DELETE FROM token_prices WHERE project_id = ? AND id IN (SELECT value FROM json_each(?))');
  const queries = new StatementCache(db);

  return {
    create(request, wbUserId) {
      const createdAt = nowInstant().text;
      const rows = Object.entries(request.costs).map(([llmId, cost]): PriceRow => {
        checkName('llm_id', llmId);
        return {
          project_id: request.project_id,
          id: uuidv7(),
          llm_id: llmId,
          provider_id: cost.provider_id ?? 'default',
          effective_date: effectiveDate(cost.effective_date, llmId) ?? createdAt,
          prompt_token_cost: checkedCost('prompt_token_cost', cost.prompt_token_cost, llmId),
          completion_token_cost: checkedCost('completion_token_cost', cost.completion_token_cost, llmId),
          prompt_token_cost_unit: cost.prompt_token_cost_unit ?? 'USD',
          completion_token_cost_unit: cost.completion_token_cost_unit ?? 'USD',
          created_by: wbUserId,
          created_at: createdAt,
        };
      });
      insertAll.immediate(rows);
      return { ids: rows.map((row): [string, string] => [row.id, row.llm_id]) };
    },

    query(request) {
      const wanted = request.fields ?? null;
      for (const field of wanted ?? []) {
        if (!Object.hasOwn(TOKEN_PRICE_FIELDS, field)) throw new BadRequestError(`Unknown field ${quote(field)} in fields`);
      }
      const params: unknown[] = [];
      const sql = `SELECT * FROM token_prices ${listQueryTail(request, TOKEN_PRICE_FIELDS, params)}`;
      const rows = queries.get(sql).all(...params) as PriceRow[];
      return rows.map((row) => {
        const output: Record<string, unknown> = {};
        for (const field of COST_QUERY_OUTPUT_FIELDS) output[field] = wanted === null || wanted.includes(field) ? row[field] : null;
        return output as unknown as CostQueryOutput;
      });
    },

    purge(projectId, query) {
      return deleteByIds.run(projectId, JSON.stringify(purgeIds(query, PURGE_SHAPE, { idList: true }))).changes;
    },

    priceOf(projectId) {
      if (anyPrice.get(projectId) === undefined) return (model) => findPrice(model);
      return (model, startedAt) => {
        const own = startedAt === null ? undefined : inEffectAt.get(projectId, model, startedAt);
        if (own !== undefined) return projectPrice(own);
        const list = findPrice(model);
        if (list !== undefined && startedAt !== null && list.effectiveDate <= startedAt) return list;
        // Nothing in effect at the start: the latest price there is, a project's first.
        const later = latest.get(projectId, model);
        return later === undefined ? list : projectPrice(later);
      };
    },
  };
}

function projectPrice(row: PriceRow): Price {
  return {
    promptTokenCost: row.prompt_token_cost,
    completionTokenCost: row.completion_token_cost,
    promptTokenCostUnit: row.prompt_token_cost_unit,
    completionTokenCostUnit: row.completion_token_cost_unit,
    providerId: row.provider_id,
    effectiveDate: row.effective_date,
    pricingLevel: 'project',
    pricingLevelId: row.project_id,
    createdBy: row.created_by,
    createdAt: row.created_at,
  };
}

function checkName(field: string, name: string): void {
  if (name.length === 0 || name.length > MAX_COST_NAME_CHARS) {
    throw new BadRequestError(`${field} must have 1 to ${MAX_COST_NAME_CHARS} characters, got ${name.length}`);
  }
}

function checkedCost(field: string, cost: number, llmId: string): number {
  // The route's schema already refuses Infinity (1e400 in JSON text); checked here for every caller.
  if (!Number.isFinite(cost) || cost < 0) throw new BadRequestError(`${field} of ${quote(llmId)} must be a finite number of at least 0, got ${cost}`);
  return cost;
}

/** The canonical text of an `effective_date`, or undefined when none is given. */
function effectiveDate(value: string | null | undefined, llmId: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  const instant = parseTimestamp(value);
  if (instant === null) throw new BadRequestError(`effective_date of ${quote(llmId)} must be an ISO 8601 date-time, got ${quote(value)}`);
  return instant.text;
}
