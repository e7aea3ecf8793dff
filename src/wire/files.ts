/**
 * Files on the wire (SPEC §2.6). `/file/create` takes `multipart/form-data` (a `project_id`
 * field and a `file` part), so only its answer has a type here; `/file/content` takes JSON and
 * answers the raw bytes as `application/octet-stream`.
 */
import { Type, type Static } from 'typebox';

/** Answer of `POST /file/create`: the digest of §2.2 over the file's bytes. */
export interface FileCreateRes {
  readonly digest: string;
}

/** Body of `POST /file/content`. */
export const FileContentReqSchema = Type.Object(
  { project_id: Type.String(), digest: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);
export type FileContentReq = Static<typeof FileContentReqSchema>;

/** The multipart field names of `/file/create`. */
export const FILE_CREATE_PROJECT_FIELD = 'project_id';
export const FILE_CREATE_FILE_FIELD = 'file';
