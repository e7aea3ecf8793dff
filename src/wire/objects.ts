/**
 * Versioned objects on the wire (SPEC §2.2): the bodies of `/obj/create`, `/obj/read`,
 * `/objs/query` and `/obj/delete` and what they answer. One TypeBox schema per body; the types derive from it.
 *
 * Like the hosted service's pydantic models (`BaseModelStrict`, `extra="forbid"`), the request
 * bodies are closed: an unknown key is a 422 (a misspelt filter would otherwise widen the results
 * without a word). The object itself (`obj`) stays open, as the service's `ObjSchemaForInsert` is:
 * its SDKs send a few keys more, such as `wb_user_id`. Wrong types and missing fields are a 422.
 */
import { Type, type Static } from 'typebox';
import { NullableCount, NullableString, SortByListSchema } from './common.js';

const NullableBoolean = Type.Union([Type.Boolean(), Type.Null()]);
const NullableStringList = Type.Union([Type.Array(Type.String()), Type.Null()]);
/**
 * `object_id`: `[A-Za-z0-9_.-]+`, at most 128 characters. A schema rule, so a breach is a 422
 * with its `loc`, as the spec asks.
 */
export const OBJECT_ID_PATTERN = '^[A-Za-z0-9_.-]+$';
export const MAX_OBJECT_ID_LENGTH = 128;
const ObjectId = Type.String({ pattern: OBJECT_ID_PATTERN, minLength: 1, maxLength: MAX_OBJECT_ID_LENGTH });

export const ObjectForInsertSchema = Type.Object(
  {
    project_id: Type.String(),
    object_id: ObjectId,
    val: Type.Unknown(),
    builtin_object_class: Type.Optional(NullableString),
  },
  { additionalProperties: true },
);
export type ObjectForInsert = Static<typeof ObjectForInsertSchema>;

/** Body of `POST /obj/create`. */
export const ObjCreateReqSchema = Type.Object({ obj: ObjectForInsertSchema }, { additionalProperties: false });
export type ObjCreateReq = Static<typeof ObjCreateReqSchema>;

/** Answer of `POST /obj/create`. */
export interface ObjCreateRes {
  readonly digest: string;
  readonly object_id: string;
}

/** Body of `POST /obj/read`. `digest` is a digest, `latest`, or `v<N>` (a version index). */
export const ObjReadReqSchema = Type.Object(
  {
    project_id: Type.String(),
    object_id: ObjectId,
    digest: Type.String({ minLength: 1 }),
    metadata_only: Type.Optional(NullableBoolean),
  },
  { additionalProperties: false },
);
export type ObjReadReq = Static<typeof ObjReadReqSchema>;

export const ObjectFilterSchema = Type.Object(
  {
    object_ids: Type.Optional(NullableStringList),
    base_object_classes: Type.Optional(NullableStringList),
    exclude_base_object_classes: Type.Optional(NullableStringList),
    leaf_object_classes: Type.Optional(NullableStringList),
    is_op: Type.Optional(NullableBoolean),
    latest_only: Type.Optional(NullableBoolean),
  },
  { additionalProperties: false },
);
export type ObjectFilter = Static<typeof ObjectFilterSchema>;

/** Body of `POST /objs/query`. */
export const ObjQueryReqSchema = Type.Object(
  {
    project_id: Type.String(),
    filter: Type.Optional(Type.Union([ObjectFilterSchema, Type.Null()])),
    limit: Type.Optional(NullableCount),
    offset: Type.Optional(NullableCount),
    sort_by: Type.Optional(SortByListSchema),
    metadata_only: Type.Optional(NullableBoolean),
    /** Accepted as the service accepts it; `size_bytes` is in every answer here. */
    include_storage_size: Type.Optional(NullableBoolean),
  },
  { additionalProperties: false },
);
export type ObjQueryReq = Static<typeof ObjQueryReqSchema>;

/** Most versions one `/obj/delete` may name (the hosted service's limit). */
export const MAX_DELETE_DIGESTS = 100;

/**
 * Body of `POST /obj/delete`: soft-deletes the versions `digests` names (digests, `latest` or
 * `v<N>`), or every version when it is absent, null or empty.
 */
export const ObjDeleteReqSchema = Type.Object(
  {
    project_id: Type.String(),
    object_id: ObjectId,
    digests: Type.Optional(Type.Union([Type.Array(Type.String({ minLength: 1 })), Type.Null()])),
  },
  { additionalProperties: false },
);
export type ObjDeleteReq = Static<typeof ObjDeleteReqSchema>;

/** Answer of `POST /obj/delete`. */
export interface ObjDeleteRes {
  readonly num_deleted: number;
}

/** A stored object version as read back (SPEC §2.2). */
export interface ObjSchema {
  readonly project_id: string;
  readonly object_id: string;
  readonly digest: string;
  readonly created_at: string;
  readonly deleted_at: string | null;
  readonly version_index: number;
  readonly is_latest: 0 | 1;
  readonly kind: 'op' | 'object';
  readonly base_object_class: string | null;
  readonly leaf_object_class: string | null;
  /** `{}` when read with `metadata_only`. */
  readonly val: unknown;
  readonly wb_user_id: string | null;
  /**
   * UTF-8 bytes of the stored `val` (SPEC §2.2). The local server always fills it; the hosted
   * service's schema allows null (`size_bytes: Optional[int]`), so code that reads it there must
   * expect one.
   */
  readonly size_bytes: number | null;
}

/** Answer of `POST /obj/read`. */
export interface ObjReadRes {
  readonly obj: ObjSchema;
}

/** Answer of `POST /objs/query`. */
export interface ObjQueryRes {
  readonly objs: ObjSchema[];
}
