/**
 * The nesting bound on every JSON value the server stores (call parts, object values, feedback
 * payloads).
 */
import { BadRequestError } from './errors.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../wire/digest.js';

/**
 * Refuse a JSON value nested deeper than MAX_JSON_DEPTH with a 400 naming `what`. SQLite's JSON
 * functions fail ("malformed JSON") on documents nested past 1000 levels: one such stored value
 * would turn every later query of its project that reads that column (`summary.weave.status`
 * reads `summary` on every row) into a 500. `JSON.stringify` overflows the stack far deeper
 * still. Iterative, so hostile depth cannot overflow the stack here either.
 *
 * @example
 * assertJsonDepth(body.payload, 'Feedback payload'); // throws BadRequestError past 500 levels
 */
export function assertJsonDepth(value: unknown, what: string): void {
  if (typeof value !== 'object' || value === null) return;
  const stack: Array<{ value: object; depth: number }> = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop() as { value: object; depth: number };
    if (depth >= MAX_JSON_DEPTH) {
      throw new BadRequestError(`${what} is nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    const children: unknown[] = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) {
      if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: depth + 1 });
    }
  }
}

/**
 * Text shorter than this cannot hold a container at depth MAX_JSON_DEPTH: that takes
 * MAX_JSON_DEPTH + 1 nested containers of at least two characters each.
 */
const SHORTEST_TOO_DEEP_TEXT = 2 * (MAX_JSON_DEPTH + 1);

/**
 * `JSON.stringify(value)`, or null when the value is nested deeper than MAX_JSON_DEPTH (the
 * caller turns that into its 400). The same rule as `assertJsonDepth` at about the cost of the
 * stringify alone: most values are too short to be that deep, so only long texts are walked, and
 * the walk (recursive, but stopping at MAX_JSON_DEPTH) allocates nothing. A value so deep that
 * `JSON.stringify` overflows the stack is too deep by definition.
 *
 * @example
 * const text = stringifyWithinDepth(body.inputs);
 * if (text === null) throw new BadRequestError('inputs is nested too deeply');
 */
export function stringifyWithinDepth(value: unknown): string | null {
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    if (error instanceof RangeError && reachesMaxDepth(value)) return null;
    throw error;
  }
  if (text.length >= SHORTEST_TOO_DEEP_TEXT && reachesMaxDepth(value)) return null;
  return text;
}

/** Whether `value` is or holds a container at depth MAX_JSON_DEPTH. */
function reachesMaxDepth(value: unknown): boolean {
  return typeof value === 'object' && value !== null && nestsDeeperThan(value, MAX_JSON_DEPTH);
}
