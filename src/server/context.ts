/**
 * What route modules receive from the app: the database, the server's settings, and the one
 * authorization check. Route modules are plain functions `(app, ctx) => void` registered by `app.ts`.
 */
import type { ReaderPool } from './store/readers.js';
import type { SqliteDatabase } from './store/sqlite.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/** A configured user of the local server. `entities: ['*']` grants every entity. */
export interface ServerUser {
  readonly username: string;
  readonly password: string;
  readonly entities: readonly string[];
}

export interface ServerContext {
  readonly db: SqliteDatabase;
  /** Every project answers v1 call writes with CALLS_COMPLETE_MODE_REQUIRED (SPEC §2.1). */
  readonly completeMode: boolean;
  /**
   * The read connections streamed answers run on (calls and tables queries), one pool for all:
   * at most `maxConcurrentStreams` at once; past it a query answers 503.
   */
  readonly readers: ReaderPool;
  /**
   * Check that `projectId` is an `entity/project` the authenticated user may use and return the
   * user's name (the `wb_user_id` of what it writes). Throws 400 for a malformed project id and
   * 403 for an entity the user is not granted.
   */
  authorizeProject(request: FastifyRequest, projectId: string): string;
}

export type RouteModule = (app: FastifyInstance, ctx: ServerContext) => void;
