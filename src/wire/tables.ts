/**
 * Tables and ref reads on the wire: the bodies of `/table/create`, `/table/update`,
 * `/table/create_from_digests`, `/table/query` (and `/table/query_stream`), `/table/query_stats`,
 * `/table/query_stats_batch` and `/refs/read_batch`, and what they answer. The SPEC does not
 * cover tables; these follow the hosted service's `trace_server_interface.py`.
 *
 * A table is an ordered list of row digests; a row is a JSON object stored once per digest per
 * project. Row digest: SHA-256 of the text Python's `json.dumps(row, sort_keys=True)` prints (as
 * the service's `compute_row_digest`; its older servers did not sort), in the service's alphabet. Table digest: lowercase hex SHA-256 of the
 * row digests concatenated (64 characters, unlike every other digest of the service).
 *
 * Request bodies are closed, as the service's `BaseModelStrict` ones are; `table` is open, as its
 * `TableSchemaForInsert` is. The update specs are closed too: the service's would read
 * `{"append": ..., "pop": ...}` as an append and drop the pop without a word.
 */
import { Type, type Static } from 'typebox';
import { JsonObject, NullableCount, NullableString, SortByListSchema } from './common.js';

const NullableBoolean = Type.Union([Type.Boolean(), Type.Null()]);
/** A table digest: 64 lowercase hex characters (`hashlib.sha256(...).hexdigest()`). */
export const TABLE_DIGEST_PATTERN = '^[0-9a-f]{64}$';
/** A row digest: 43 characters of `[A-Za-z0-9]` (the service's object digest alphabet). */
export const ROW_DIGEST_PATTERN = '^[A-Za-z0-9]{43}$';
const TableDigest = Type.String({ pattern: TABLE_DIGEST_PATTERN });
const RowDigest = Type.String({ pattern: ROW_DIGEST_PATTERN });

/**
 * Most refs one `/refs/read_batch` reads: the hosted service's limit (past it, a 400 "Too many
 * refs").
 */
export const MAX_REFS_PER_READ = 1000;

/** `table` of `/table/create`: its rows, in order. */
export const TableForInsertSchema = Type.Object(
  {
    project_id: Type.String(),
    rows: Type.Array(JsonObject),
    /** The client's own table digest; a table that digests otherwise is a 409 and is not stored. */
    expected_digest: Type.Optional(NullableString),
  },
  { additionalProperties: true },
);

/** Body of `POST /table/create`. */
export const TableCreateReqSchema = Type.Object({ table: TableForInsertSchema }, { additionalProperties: false });
export type TableCreateReq = Static<typeof TableCreateReqSchema>;

/** Answer of `POST /table/create`. */
export interface TableCreateRes {
  readonly digest: string;
  /** One per row, in order. */
  readonly row_digests: string[];
}

const RowPayload = Type.Object({ row: JsonObject }, { additionalProperties: false });
const IndexPayload = Type.Object({ index: Type.Integer() }, { additionalProperties: false });
const InsertPayload = Type.Object({ index: Type.Integer(), row: JsonObject }, { additionalProperties: false });

/** One operation of `/table/update`, applied in order: `append` a row, `pop` or `insert` at an index. */
export const TableUpdateSpecSchema = Type.Union([
  Type.Object({ append: RowPayload }, { additionalProperties: false }),
  Type.Object({ pop: IndexPayload }, { additionalProperties: false }),
  Type.Object({ insert: InsertPayload }, { additionalProperties: false }),
]);
export type TableUpdateSpec = Static<typeof TableUpdateSpecSchema>;

/** Body of `POST /table/update`: a new table made from `base_digest` by `updates`. */
export const TableUpdateReqSchema = Type.Object(
  { project_id: Type.String(), base_digest: TableDigest, updates: Type.Array(TableUpdateSpecSchema) },
  { additionalProperties: false },
);
export type TableUpdateReq = Static<typeof TableUpdateReqSchema>;

/** Answer of `POST /table/update`. */
export interface TableUpdateRes {
  readonly digest: string;
  /** One per update: the row appended or inserted, or the row popped. */
  readonly updated_row_digests: string[];
}

/** Body of `POST /table/create_from_digests`: a table of rows stored already (in this project). */
export const TableCreateFromDigestsReqSchema = Type.Object(
  { project_id: Type.String(), row_digests: Type.Array(RowDigest), expected_digest: Type.Optional(NullableString) },
  { additionalProperties: false },
);
export type TableCreateFromDigestsReq = Static<typeof TableCreateFromDigestsReqSchema>;

/** Answer of `POST /table/create_from_digests`. */
export interface TableCreateFromDigestsRes {
  readonly digest: string;
}

export const TableRowFilterSchema = Type.Object(
  { row_digests: Type.Optional(Type.Union([Type.Array(Type.String()), Type.Null()])) },
  { additionalProperties: false },
);

/**
 * Body of `POST /table/query` and `/table/query_stream`. `sort_by` fields are dotted paths into
 * the rows (`inputs.question`); without it, rows come in table order.
 */
export const TableQueryReqSchema = Type.Object(
  {
    project_id: Type.String(),
    digest: TableDigest,
    filter: Type.Optional(Type.Union([TableRowFilterSchema, Type.Null()])),
    limit: Type.Optional(NullableCount),
    offset: Type.Optional(NullableCount),
    sort_by: Type.Optional(SortByListSchema),
  },
  { additionalProperties: false },
);
export type TableQueryReq = Static<typeof TableQueryReqSchema>;

/** One row of a table as read back. */
export interface TableRowSchema {
  readonly digest: string;
  readonly val: Record<string, unknown>;
  /** The row's position in the table (0-based), whatever the order of the answer. */
  readonly original_index: number;
}

/** Answer of `POST /table/query` (`/table/query_stream` answers the rows as JSON lines). */
export interface TableQueryRes {
  readonly rows: TableRowSchema[];
}

/** Body of `POST /table/query_stats`. */
export const TableQueryStatsReqSchema = Type.Object(
  { project_id: Type.String(), digest: TableDigest },
  { additionalProperties: false },
);
export type TableQueryStatsReq = Static<typeof TableQueryStatsReqSchema>;

/** Answer of `POST /table/query_stats` (0 rows for a table that does not exist). */
export interface TableQueryStatsRes {
  readonly count: number;
}

/** Body of `POST /table/query_stats_batch`. */
export const TableQueryStatsBatchReqSchema = Type.Object(
  {
    project_id: Type.String(),
    digests: Type.Optional(Type.Union([Type.Array(TableDigest), Type.Null()])),
    include_storage_size: Type.Optional(NullableBoolean),
  },
  { additionalProperties: false },
);
export type TableQueryStatsBatchReq = Static<typeof TableQueryStatsBatchReqSchema>;

/** One table of `/table/query_stats_batch`. */
export interface TableStatsRow {
  readonly digest: string;
  readonly count: number;
  /** UTF-8 bytes of the table's rows, each occurrence counted; null unless asked for. */
  readonly storage_size_bytes: number | null;
}

/** Answer of `POST /table/query_stats_batch`: the tables that exist, in the order asked. */
export interface TableQueryStatsBatchRes {
  readonly tables: TableStatsRow[];
}

/** Body of `POST /refs/read_batch`. */
export const RefsReadBatchReqSchema = Type.Object({ refs: Type.Array(Type.String()) }, { additionalProperties: false });
export type RefsReadBatchReq = Static<typeof RefsReadBatchReqSchema>;

/** Answer of `POST /refs/read_batch`: one value per ref, in order (null for a deleted object or a path that is not there). */
export interface RefsReadBatchRes {
  readonly vals: unknown[];
}
