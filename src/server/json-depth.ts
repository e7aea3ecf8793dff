/**
 * The nesting bound on every JSON value the server stores (call parts, object values, feedback
 * payloads).
 */
import { BadRequestError } from './errors.js';
import { MAX_JSON_DEPTH } from '../wire/digest.js';

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
