/**
 * Pieces every wire module shares: the nullable field shapes, `limit`/`offset` counts, the `query`
 * field, one `sort_by` schema (calls, objects and feedback queries sort the same way), and the `isRecord` guard the server uses to
 * read JSON bodies it has not validated field by field.
 */
import { Type, type Static } from 'typebox';

/** A string or JSON null (pydantic's `Optional[str]`). */
export const NullableString = Type.Union([Type.String(), Type.Null()]);

/** A JSON object with any values (`Dict[str, Any]`). */
export const JsonObject = Type.Record(Type.String(), Type.Unknown());

/** A `limit` or `offset`: a count, or null for none. */
export const NullableCount = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);

/** A `query` body field: `{"$expr": Operation}`; its grammar is checked by the query compiler. */
export const QuerySchema = Type.Object({ $expr: Type.Unknown() }, { additionalProperties: false });
export type Query = Static<typeof QuerySchema>;

export const SortDirectionSchema = Type.Union([Type.Literal('asc'), Type.Literal('desc')]);
export type SortDirection = Static<typeof SortDirectionSchema>;

/**
 * Most `sort_by` entries a query takes. Each becomes an ORDER BY term (a JSON path one carries
 * several bound parameters) and SQLite refuses statements with thousands of them; 100 payload
 * paths still compile and run (feedback-routes.test.ts), and no reader sorts by more.
 */
export const MAX_SORT_KEYS = 100;

/** One `sort_by` entry: a field (dotted paths allowed where the query says so) and a direction. */
export const SortBySchema = Type.Object(
  { field: Type.String({ minLength: 1 }), direction: SortDirectionSchema },
  { additionalProperties: false },
);
export type SortBy = Static<typeof SortBySchema>;

/** A `sort_by` list, or null for the default order. */
export const SortByListSchema = Type.Union([Type.Array(SortBySchema, { maxItems: MAX_SORT_KEYS }), Type.Null()]);

/** A plain JSON object (not null, not a list). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
