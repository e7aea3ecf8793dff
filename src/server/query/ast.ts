/**
 * The parsed form of a `$expr` query (SPEC §2.4). `parse.ts` builds it from untrusted JSON and
 * rejects anything outside the grammar; `compile.ts` turns it into SQL. Keeping the two apart
 * means every grammar error (422) is found before any field is looked up (400), the order in which
 * the hosted service (pydantic validation, then query building) reports them.
 */

/** Comparison operators with two operands. */
export type ComparisonOperator = '$eq' | '$gt' | '$gte' | '$lt' | '$lte';

/** Target types of `$convert`. */
export type ConvertTarget = 'double' | 'int' | 'string' | 'bool' | 'exists';

/** A JSON value given with `$literal`. */
export type LiteralValue = string | number | boolean | null | LiteralValue[] | { [key: string]: LiteralValue };

export type Operand =
  | { readonly kind: 'and' | 'or'; readonly items: readonly Operand[] }
  | { readonly kind: 'not'; readonly item: Operand }
  | { readonly kind: 'compare'; readonly operator: ComparisonOperator; readonly left: Operand; readonly right: Operand }
  | { readonly kind: 'in'; readonly needle: Operand; readonly haystack: readonly Operand[] }
  | { readonly kind: 'contains'; readonly input: Operand; readonly substr: Operand; readonly caseInsensitive: boolean }
  | { readonly kind: 'literal'; readonly value: LiteralValue }
  | { readonly kind: 'field'; readonly path: string }
  | { readonly kind: 'convert'; readonly input: Operand; readonly to: ConvertTarget };
