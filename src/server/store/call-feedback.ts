/**
 * A call's feedback, as the hosted calls query reads it: the records whose `weave_ref` is the
 * call's ref (`weave:///<entity>/<project>/call/<id>`), for `include_feedback` (every record, in
 * `summary.weave.feedback`) and for the query fields `feedback.[<feedback type>].…` (one value
 * per call, for `$expr` and `sort_by`). The SQL runs correlated on a call row `c`, and finds the
 * records through `feedback_by_ref`.
 */
import { BadRequestError } from '../errors.js';
import { jsonPathOf, param, raw, splitFieldPath, sql, type FieldFamily, type ResolvedField, type SqlFragment } from '../query/index.js';
import { quote } from '../quote.js';

/** The feedback records `f` of call row `c`. */
const OF_CALL_SQL = `f.project_id = c.project_id AND f.weave_ref = 'weave:///' || c.project_id || '/call/' || c.id`;

/**
 * `summary.weave.feedback` of a call (`include_feedback`) as JSON text: its records in the order
 * they were created, with the fields the hosted service puts there (no `id` or `project_id`).
 */
export const CALL_FEEDBACK_JSON_SQL = `(SELECT json_group_array(json_object(
    'feedback_type', f.feedback_type, 'weave_ref', f.weave_ref, 'payload', json(f.payload),
    'creator', f.creator, 'created_at', f.created_at, 'wb_user_id', f.wb_user_id,
    'runnable_ref', f.runnable_ref, 'call_ref', f.call_ref, 'trigger_ref', f.trigger_ref,
    'annotation_ref', f.annotation_ref) ORDER BY f.rowid)
  FROM feedback f WHERE ${OF_CALL_SQL})`;

/** The ref fields a query may read from a call's feedback (the hosted service's two). */
const REF_COLUMNS: Readonly<Record<string, string>> = { runnable_ref: 'f.runnable_ref', trigger_ref: 'f.trigger_ref' };

/**
 * `feedback.[<feedback type>].payload.<path>` (or `.payload` whole, `.runnable_ref`,
 * `.trigger_ref`) in a calls query, the hosted service's syntax: the value from the call's most
 * recent record of that type (`*`: of any type) that has it, so a call with several scores is
 * compared by its latest. The hosted service takes any one such record (ClickHouse `anyIf`).
 * A call without such a record has no value (NULL: `$eq` with null matches it, sorts put it last).
 */
export const CALL_FEEDBACK_FIELDS: FieldFamily = {
  type: 'family',
  resolve(rest: string, path: string): ResolvedField {
    const { feedbackType, field } = splitFeedbackField(rest, path);
    const ofType = feedbackType === '*' ? raw('') : sql` AND f.feedback_type = ${param(feedbackType)}`;
    const [first, ...deeper] = splitFieldPath(field).parts;
    if (first === 'payload') {
      const inPayload = jsonPathOf(raw('f.payload'), deeper, path);
      const value = sql`(SELECT f.payload -> ${inPayload} FROM feedback f WHERE ${raw(OF_CALL_SQL)}${ofType}
        AND json_type(f.payload, ${inPayload}) IS NOT NULL ORDER BY f.rowid DESC LIMIT 1)`;
      return { kind: 'json', doc: value, path: param('$') };
    }
    // Own keys only: `constructor` must not find Object.prototype's (its text would reach the SQL).
    const column = first !== undefined && deeper.length === 0 && Object.hasOwn(REF_COLUMNS, first) ? REF_COLUMNS[first] : undefined;
    if (column === undefined) throw invalidField(path);
    const value: SqlFragment = sql`(SELECT ${raw(column)} FROM feedback f WHERE ${raw(OF_CALL_SQL)}${ofType}
      AND ${raw(column)} IS NOT NULL ORDER BY f.rowid DESC LIMIT 1)`;
    return { kind: 'scalar', type: 'text', value };
  },
};

/**
 * `[wandb.reaction.1].payload.emoji` -> type `wandb.reaction.1`, field `payload.emoji`. The type
 * may hold dots and brackets: it ends at the last `].` (the hosted service's greedy
 * `^(\[.+\])\.(.+)$`).
 */
function splitFeedbackField(rest: string, path: string): { feedbackType: string; field: string } {
  const end = rest.lastIndexOf('].');
  if (!rest.startsWith('[') || end < 2 || end + 2 >= rest.length) throw invalidField(path);
  return { feedbackType: rest.slice(1, end), field: rest.slice(end + 2) };
}

function invalidField(path: string): BadRequestError {
  return new BadRequestError(
    `Invalid feedback field ${quote(path)}: expected feedback.[<feedback type>].payload.<path>, .runnable_ref or .trigger_ref`,
  );
}
