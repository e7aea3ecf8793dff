/**
 * A project's token prices (migration 4), as the service keeps them in `llm_token_prices` at its
 * `project` pricing level; the server's own list prices (`../costs.ts`) are its `default` level and
 * are not stored.
 *
 * - `effective_date` and `created_at` are canonical UTC text of fixed width, so text order is time
 *   order and a call's `started_at` compares with them as text (`timestamps.ts`).
 * - `prices_by_model` finds the price in effect at a call's start with one index seek per model.
 */
export const TOKEN_PRICES_DDL = `
CREATE TABLE token_prices (
  project_id                 TEXT NOT NULL,
  id                         TEXT NOT NULL,
  llm_id                     TEXT NOT NULL,
  provider_id                TEXT NOT NULL,
  effective_date             TEXT NOT NULL,
  prompt_token_cost          REAL NOT NULL,
  completion_token_cost      REAL NOT NULL,
  prompt_token_cost_unit     TEXT NOT NULL,
  completion_token_cost_unit TEXT NOT NULL,
  created_by                 TEXT NOT NULL,
  created_at                 TEXT NOT NULL
);
CREATE UNIQUE INDEX prices_by_id ON token_prices (project_id, id);
CREATE INDEX prices_by_model ON token_prices (project_id, llm_id, effective_date);
`;
