/**
 * Validates an untrusted `{"$expr": ...}` body field against the grammar of SPEC §2.4 and builds
 * the AST. Every structural problem becomes a 422 `ValidationError` whose `loc` points at the
 * offending node, in the pydantic style the hosted service answers with.
 */

import { ValidationError } from '../errors.js';
import type { ComparisonOperator, ConvertTarget, LiteralValue, Operand } from './ast.js';

/**
 * Deepest nesting of operands (and of `$literal` values) accepted. Recursion is bounded by this,
 * so a hostile body cannot overflow the stack; 64 is far beyond any real filter.
 */
export const MAX_QUERY_DEPTH = 64;

/**
 * Most operands (each `$in` list item and each literal element counts) in one query. Bounds the
 * work and the SQL size a single request can cause; list literals in `$in` travel as one bound
 * JSON parameter, so large id lists stay cheap.
 */
export const MAX_QUERY_NODES = 100_000;

const COMPARISONS: readonly ComparisonOperator[] = ['$eq', '$gt', '$gte', '$lt', '$lte'];
// In the hosted service's declaration order, which its literal_error message follows.
const CONVERT_TARGETS: readonly ConvertTarget[] = ['double', 'string', 'int', 'bool', 'exists'];
const OPERATIONS = ['$and', '$or', '$not', ...COMPARISONS, '$in', '$contains'] as const;
const OPERAND_KEYS = [...OPERATIONS, '$literal', '$getField', '$convert'] as const;

type Loc = ReadonlyArray<string | number>;

function fail(type: string, loc: Loc, msg: string, input: unknown): never {
  throw new ValidationError([{ type, loc: [...loc], msg, input }]);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function quoteList(names: readonly string[]): string {
  return names.map((n) => `'${n}'`).join(', ');
}

/** Walks the body once, counting depth and nodes so limits are enforced before any recursion blows up. */
class Parser {
  private nodes = 0;

  private enter(depth: number, loc: Loc, input: unknown): void {
    if (depth > MAX_QUERY_DEPTH) {
      fail('too_deep', loc, `Query is nested deeper than ${MAX_QUERY_DEPTH} levels`, input);
    }
    this.nodes += 1;
    if (this.nodes > MAX_QUERY_NODES) {
      fail('too_large', loc, `Query has more than ${MAX_QUERY_NODES} operands`, input);
    }
  }

  /** The value of `$expr`: must be an operation, not a bare operand (hosted: `expr_: Operation`). */
  expression(input: unknown, loc: Loc): Operand {
    const { key } = this.singleKey(input, loc, OPERATIONS);
    if (!(OPERATIONS as readonly string[]).includes(key)) {
      fail(
        'value_error',
        [...loc, key],
        `Value error, '$expr' must be an operation (${OPERATIONS.join(', ')}), not ${key}`,
        input,
      );
    }
    return this.operand(input, loc, 1);
  }

  /** Checks that `input` is an object with exactly one key, one of `allowed`. */
  private singleKey(input: unknown, loc: Loc, allowed: readonly string[]): { key: string; value: unknown } {
    if (!isPlainObject(input)) {
      fail('model_type', loc, 'Input should be a valid dictionary or object to extract fields from', input);
    }
    const keys = Object.keys(input);
    if (keys.length !== 1) {
      fail(
        'value_error',
        loc,
        `Value error, an operation must have exactly one key (one of ${allowed.join(', ')}), got ${keys.length}`,
        input,
      );
    }
    const key = keys[0] as string;
    if (!(OPERAND_KEYS as readonly string[]).includes(key)) {
      fail('value_error', loc, `Value error, unknown operator '${key}'; expected one of ${OPERAND_KEYS.join(', ')}`, input);
    }
    return { key, value: input[key] };
  }

  operand(input: unknown, loc: Loc, depth: number): Operand {
    this.enter(depth, loc, input);
    const { key, value } = this.singleKey(input, loc, OPERAND_KEYS);
    const at = [...loc, key];
    switch (key) {
      case '$and':
      case '$or':
        return { kind: key === '$and' ? 'and' : 'or', items: this.operandList(value, at, depth, 1) };
      case '$not':
        return { kind: 'not', item: this.tuple(value, at, depth, 1)[0] as Operand };
      case '$eq':
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte': {
        const [left, right] = this.tuple(value, at, depth, 2) as [Operand, Operand];
        return { kind: 'compare', operator: key, left, right };
      }
      case '$in':
        return this.inOperation(value, at, depth);
      case '$contains':
        return this.contains(value, at, depth);
      case '$literal':
        return { kind: 'literal', value: this.literal(value, at, depth) };
      case '$getField':
        if (typeof value !== 'string') fail('string_type', at, 'Input should be a valid string', value);
        return { kind: 'field', path: value };
      default:
        return this.convert(value, at, depth);
    }
  }

  private operandList(value: unknown, loc: Loc, depth: number, minItems: number): Operand[] {
    if (!Array.isArray(value)) fail('list_type', loc, 'Input should be a valid list', value);
    if (value.length < minItems) {
      fail('too_short', loc, `List should have at least ${minItems} item after validation, not ${value.length}`, value);
    }
    return value.map((item, i) => this.operand(item, [...loc, i], depth + 1));
  }

  /** A fixed-length operand tuple (`$not` [a], comparisons [a, b]). */
  private tuple(value: unknown, loc: Loc, depth: number, length: number): Operand[] {
    if (!Array.isArray(value)) fail('tuple_type', loc, 'Input should be a valid tuple', value);
    if (value.length < length) {
      // pydantic reports the first missing position.
      fail('missing', [...loc, value.length], 'Field required', value);
    }
    if (value.length > length) {
      fail('too_long', loc, `Tuple should have at most ${length} items after validation, not ${value.length}`, value);
    }
    return value.map((item, i) => this.operand(item, [...loc, i], depth + 1));
  }

  /** `$in: [needle, [operand, ...]]`; the list may also be given as `{"$literal": [...]}`. */
  private inOperation(value: unknown, loc: Loc, depth: number): Operand {
    if (!Array.isArray(value)) fail('tuple_type', loc, 'Input should be a valid tuple', value);
    if (value.length < 2) fail('missing', [...loc, value.length], 'Field required', value);
    if (value.length > 2) {
      fail('too_long', loc, `Tuple should have at most 2 items after validation, not ${value.length}`, value);
    }
    const needle = this.operand(value[0], [...loc, 0], depth + 1);
    const list: unknown = value[1];
    const listLoc = [...loc, 1];
    if (isPlainObject(list) && Object.keys(list).length === 1 && '$literal' in list) {
      const literal = this.literal(list.$literal, [...listLoc, '$literal'], depth + 1);
      if (!Array.isArray(literal)) {
        fail('list_type', [...listLoc, '$literal'], 'Input should be a valid list', list.$literal);
      }
      return { kind: 'in', needle, haystack: literal.map((v) => ({ kind: 'literal', value: v })) };
    }
    return { kind: 'in', needle, haystack: this.operandList(list, listLoc, depth, 0) };
  }

  private contains(value: unknown, loc: Loc, depth: number): Operand {
    const spec = this.spec(value, loc, ['input', 'substr'], ['case_insensitive']);
    const flag = spec.case_insensitive;
    if (flag !== undefined && flag !== null && typeof flag !== 'boolean') {
      fail('bool_type', [...loc, 'case_insensitive'], 'Input should be a valid boolean', flag);
    }
    return {
      kind: 'contains',
      input: this.operand(spec.input, [...loc, 'input'], depth + 1),
      substr: this.operand(spec.substr, [...loc, 'substr'], depth + 1),
      caseInsensitive: flag === true,
    };
  }

  private convert(value: unknown, loc: Loc, depth: number): Operand {
    const spec = this.spec(value, loc, ['input', 'to'], []);
    const to = spec.to;
    if (typeof to !== 'string' || !(CONVERT_TARGETS as readonly string[]).includes(to)) {
      fail('literal_error', [...loc, 'to'], `Input should be ${quoteList(CONVERT_TARGETS).replace(/, ([^,]*)$/, ' or $1')}`, to);
    }
    return { kind: 'convert', input: this.operand(spec.input, [...loc, 'input'], depth + 1), to: to as ConvertTarget };
  }

  /** An object with the `required` keys and possibly the `optional` ones; nothing else. */
  private spec(value: unknown, loc: Loc, required: readonly string[], optional: readonly string[]): Record<string, unknown> {
    if (!isPlainObject(value)) {
      fail('model_type', loc, 'Input should be a valid dictionary or object to extract fields from', value);
    }
    for (const key of required) {
      if (!(key in value)) fail('missing', [...loc, key], 'Field required', value);
    }
    for (const key of Object.keys(value)) {
      if (!required.includes(key) && !optional.includes(key)) {
        fail('extra_forbidden', [...loc, key], 'Extra inputs are not permitted', value[key]);
      }
    }
    return value;
  }

  /**
   * A JSON value. Elements written in the hosted SDK's serialised form (`{"$literal": x}` inside a
   * list or object literal, its `list[LiteralOperation]` type) are unwrapped to `x`.
   */
  private literal(value: unknown, loc: Loc, depth: number): LiteralValue {
    if (depth > MAX_QUERY_DEPTH) fail('too_deep', loc, `Query is nested deeper than ${MAX_QUERY_DEPTH} levels`, value);
    if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) fail('finite_number', loc, 'Input should be a finite number', value);
      return value;
    }
    if (Array.isArray(value)) {
      this.nodes += value.length;
      if (this.nodes > MAX_QUERY_NODES) fail('too_large', loc, `Query has more than ${MAX_QUERY_NODES} operands`, value);
      return value.map((item, i) => this.literal(unwrapLiteral(item), [...loc, i], depth + 1));
    }
    if (isPlainObject(value)) {
      const keys = Object.keys(value);
      this.nodes += keys.length;
      if (this.nodes > MAX_QUERY_NODES) fail('too_large', loc, `Query has more than ${MAX_QUERY_NODES} operands`, value);
      const out: Record<string, LiteralValue> = {};
      for (const key of keys) {
        // defineProperty: a "__proto__" key stays an own key instead of changing the prototype.
        Object.defineProperty(out, key, {
          value: this.literal(unwrapLiteral(value[key]), [...loc, key], depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    return fail('json_type', loc, 'Input should be a JSON value', String(value));
  }
}

function unwrapLiteral(value: unknown): unknown {
  if (isPlainObject(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === '$literal') return value.$literal;
  }
  return value;
}

/**
 * Parses the body field `query` (`{"$expr": Operation}`) into an AST, or throws a 422
 * `ValidationError` locating the first grammar error.
 *
 * @example parseQuery({ $expr: { $eq: [{ $getField: 'op_name' }, { $literal: 'predict' }] } }, ['body', 'query'])
 */
export function parseQuery(query: unknown, loc: Loc): Operand {
  if (!isPlainObject(query)) {
    fail('model_type', loc, 'Input should be a valid dictionary or object to extract fields from', query);
  }
  for (const key of Object.keys(query)) {
    if (key !== '$expr') fail('extra_forbidden', [...loc, key], 'Extra inputs are not permitted', query[key]);
  }
  if (!('$expr' in query)) fail('missing', [...loc, '$expr'], 'Field required', query);
  return new Parser().expression(query.$expr, [...loc, '$expr']);
}
