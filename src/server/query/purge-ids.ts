/**
 * The ids a purge query names. The service deletes feedback and token prices only by id, for
 * safety: `{"$eq": [{"$getField": "id"}, {"$literal": "<id>"}]}` (operands in either order here),
 * an `$or` of those, and for token prices also `{"$in": [{"$getField": "id"}, [{"$literal":
 * "<id>"}, ...]]}` (its feedback purge refuses `$in`). A query that breaks the `$expr` grammar is
 * a 422 with its `loc`, as in every other query (SPEC §2.4); any well-formed shape but those is a
 * 400, so a purge never deletes by a general query.
 */
import { BadRequestError } from '../errors.js';
import { isRecord } from '../../wire/common.js';
import { parseQuery } from './parse.js';

/**
 * The ids the body field `query` (`{"$expr": ...}`) selects.
 * @throws ValidationError (422, `loc` from `["body", "query"]`) when the query breaks the grammar;
 *   BadRequestError with `shapeMessage` for any other shape (`$in` included unless `idList`).
 *
 * @example
 * purgeIds({ $expr: { $in: [{ $getField: 'id' }, [{ $literal: 'a' }, { $literal: 'b' }]] } }, '...', { idList: true }); // ['a', 'b']
 */
export function purgeIds(query: unknown, shapeMessage: string, { idList }: { readonly idList: boolean }): string[] {
  parseQuery(query, ['body', 'query']);
  const expr = (query as { $expr: unknown }).$expr;
  const refuse = (): never => {
    throw new BadRequestError(shapeMessage);
  };
  if (!isRecord(expr) || Object.keys(expr).length !== 1) return refuse();
  if (Array.isArray(expr.$or)) {
    if (expr.$or.length === 0) return refuse();
    return expr.$or.map((operation) => idOfEquality(operation) ?? refuse());
  }
  if (idList && Array.isArray(expr.$in)) {
    const [needle, list, ...rest] = expr.$in as unknown[];
    if (rest.length > 0 || !isIdField(needle) || !Array.isArray(list) || list.length === 0) return refuse();
    return list.map((literal) => literalText(literal) ?? refuse());
  }
  return [idOfEquality(expr) ?? refuse()];
}

/** The id of `{"$eq": [id field, literal]}` (either order), or undefined for anything else. */
function idOfEquality(operation: unknown): string | undefined {
  if (!isRecord(operation) || Object.keys(operation).length !== 1 || !Array.isArray(operation.$eq)) return undefined;
  const operands = operation.$eq as unknown[];
  if (operands.length !== 2) return undefined;
  const [a, b] = operands;
  return isIdField(a) ? literalText(b) : isIdField(b) ? literalText(a) : undefined;
}

function literalText(operand: unknown): string | undefined {
  if (!isRecord(operand) || Object.keys(operand).length !== 1 || typeof operand.$literal !== 'string') return undefined;
  return operand.$literal;
}

function isIdField(operand: unknown): boolean {
  return isRecord(operand) && Object.keys(operand).length === 1 && operand.$getField === 'id';
}
