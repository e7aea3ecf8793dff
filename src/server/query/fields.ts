/**
 * How a query names the fields of a table: the contract between the `$expr` compiler and the
 * stores that use it (calls and feedback). The compiler never splices user text into SQL; it only
 * emits the `sql` given here and bound parameters.
 */

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

/**
 * Known fields by name. Names may contain dots (`summary.weave.status`): the longest name that is
 * a prefix of a path (at a `.` boundary) wins, so derived sub-fields can shadow their JSON column.
 */
export type FieldTable = Readonly<Record<string, FieldSpec>>;
