/**
 * Token prices on the wire: the bodies of the hosted service's `/cost/create`, `/cost/query` and
 * `/cost/purge` (what the Weave SDKs' `add_cost`, `query_costs` and `purge_costs` send) and what
 * they answer. A project's prices take precedence over the server's own in `summary.weave.costs`
 * (`include_costs`). Request bodies are closed, as the service's models are: unknown keys, wrong
 * types and missing fields are a 422.
 */
import { Type, type Static } from 'typebox';
import { NullableCount, NullableString, QuerySchema, SortByListSchema } from './common.js';

/** Most models one `/cost/create` prices (each is one stored price). */
export const MAX_COSTS_PER_CREATE = 1000;
/** Longest model name (`llm_id`), provider id or unit. */
export const MAX_COST_NAME_CHARS = 256;

const CostName = Type.String({ minLength: 1, maxLength: MAX_COST_NAME_CHARS });
const NullableCostName = Type.Union([CostName, Type.Null()]);

/** The price of one model: USD (or `*_unit`) per token, from `effective_date` (default: now). */
export const CostCreateInputSchema = Type.Object(
  {
    prompt_token_cost: Type.Number(),
    completion_token_cost: Type.Number(),
    prompt_token_cost_unit: Type.Optional(NullableCostName),
    completion_token_cost_unit: Type.Optional(NullableCostName),
    effective_date: Type.Optional(NullableString),
    provider_id: Type.Optional(NullableCostName),
  },
  { additionalProperties: false },
);
export type CostCreateInput = Static<typeof CostCreateInputSchema>;

/** Body of `POST /cost/create`: prices by model name (`llm_id`, as it appears in `summary.usage`). */
export const CostCreateReqSchema = Type.Object(
  {
    project_id: Type.String(),
    costs: Type.Record(Type.String(), CostCreateInputSchema, { maxProperties: MAX_COSTS_PER_CREATE }),
    wb_user_id: Type.Optional(NullableString),
  },
  { additionalProperties: false },
);
export type CostCreateReq = Static<typeof CostCreateReqSchema>;

/** Answer of `POST /cost/create`: `[id, llm_id]` of each price stored, in the order given. */
export interface CostCreateRes {
  readonly ids: Array<[string, string]>;
}

/**
 * Body of `POST /cost/query`: a project's prices, with `fields`/`query`/`sort_by`/`limit`/`offset`.
 * As on the service, `fields` may name any price column (`pricing_level`, `created_by`, ...),
 * while an answer carries the members of CostQueryOutput only.
 */
export const CostQueryReqSchema = Type.Object(
  {
    project_id: Type.String(),
    fields: Type.Optional(Type.Union([Type.Array(Type.String(), { maxItems: 100 }), Type.Null()])),
    query: Type.Optional(Type.Union([QuerySchema, Type.Null()])),
    sort_by: Type.Optional(SortByListSchema),
    limit: Type.Optional(NullableCount),
    offset: Type.Optional(NullableCount),
  },
  { additionalProperties: false },
);
export type CostQueryReq = Static<typeof CostQueryReqSchema>;

/** One price as `/cost/query` answers it: these members always, null where `fields` left one out. */
export interface CostQueryOutput {
  readonly id: string | null;
  readonly llm_id: string | null;
  readonly prompt_token_cost: number | null;
  readonly completion_token_cost: number | null;
  readonly prompt_token_cost_unit: string | null;
  readonly completion_token_cost_unit: string | null;
  readonly effective_date: string | null;
  readonly provider_id: string | null;
}

/** The members of a `/cost/query` result, in the order they are written. */
export const COST_QUERY_OUTPUT_FIELDS = [
  'id',
  'llm_id',
  'prompt_token_cost',
  'completion_token_cost',
  'prompt_token_cost_unit',
  'completion_token_cost_unit',
  'effective_date',
  'provider_id',
] as const satisfies ReadonlyArray<keyof CostQueryOutput>;

/** Answer of `POST /cost/query`. */
export interface CostQueryRes {
  readonly results: CostQueryOutput[];
}

/** Body of `POST /cost/purge`: `query` selects prices by id only. */
export const CostPurgeReqSchema = Type.Object({ project_id: Type.String(), query: QuerySchema }, { additionalProperties: false });
export type CostPurgeReq = Static<typeof CostPurgeReqSchema>;
