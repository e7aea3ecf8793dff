/**
 * How a query names the fields of a table: the contract between the `$expr` compiler and the
 * stores that use it (calls and feedback). The compiler never splices user text into SQL; it only
 * emits the `sql` given here, what a FieldFamily builds, and bound parameters.
 */
import type { SqlFragment } from './sql.js';

/** How to read one queryable field in SQL. */
export interface FieldSpec {
  /** SQL expression (a column such as `c.op_name`, or a derived expression). Never user text. */
  readonly sql: string;
  /**
   * `text`/`number`: a scalar column. `json`: a column holding JSON text; the rest of a dotted path
   * (`inputs.a.0.b`) is read from it with SQLite's JSON functions. `datetime`: a text column of
   * ISO 8601 timestamps (`started_at`); compared with a number literal it reads as Unix seconds,
   * with a timestamp string literal as that instant (the hosted service accepts both forms).
   */
  readonly type: 'text' | 'number' | 'json' | 'datetime';
}

/** A path resolved to a scalar value, or to a value inside a JSON document. */
export type ResolvedField =
  | { readonly kind: 'scalar'; readonly type: 'text' | 'number' | 'datetime'; readonly value: SqlFragment }
  | { readonly kind: 'json'; readonly doc: SqlFragment; readonly path: SqlFragment };

/**
 * Fields under one name whose rest is not a plain JSON path, so the table resolves them itself:
 * a calls query's `feedback.[<feedback type>].payload.<path>` reads the call's feedback records.
 * `resolve` gets the text after `<name>.` and the whole path (for errors), builds SQL from trusted
 * text and bound parameters only (`jsonPathOf` gives a JSON path), and throws BadRequestError for
 * a rest it does not know.
 */
export interface FieldFamily {
  readonly type: 'family';
  resolve(rest: string, path: string): ResolvedField;
}

/**
 * Known fields by name. Names may contain dots (`summary.weave.status`): the longest name that is
 * a prefix of a path (at a `.` boundary) wins, so derived sub-fields can shadow their JSON column.
 */
export type FieldTable = Readonly<Record<string, FieldSpec | FieldFamily>>;
