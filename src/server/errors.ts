/**
 * The server's error types. Routes and stores throw these; the one error handler in `app.ts`
 * turns them into the bodies of SPEC §2.5. Anything else that escapes is a bug and becomes a 500
 * with no details.
 */

/** An error that maps to one HTTP status with a `{"reason"}` body (+ `error_code` when named). */
export class HttpError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly errorCode: string | undefined;

  constructor(status: number, reason: string, errorCode?: string) {
    super(reason);
    this.name = 'HttpError';
    this.status = status;
    this.reason = reason;
    this.errorCode = errorCode;
  }
}

/** 400: the request is well-formed JSON of the right shape but breaks a rule of the service. */
export class BadRequestError extends HttpError {
  constructor(reason: string, errorCode?: string) {
    super(400, reason, errorCode);
    this.name = 'BadRequestError';
  }
}

/** 503: the server is at a limit that frees by itself; `Retry-After` tells when to try again. */
export class ServiceUnavailableError extends HttpError {
  readonly retryAfterSeconds: number;

  constructor(reason: string, retryAfterSeconds: number) {
    super(503, reason);
    this.name = 'ServiceUnavailableError';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** 404: object, file or route not found. */
export class NotFoundError extends HttpError {
  constructor(reason: string) {
    super(404, reason);
    this.name = 'NotFoundError';
  }
}

/**
 * 404 for a read of an object version that was deleted; the body carries `deleted_at` beside
 * `reason`, as the hosted service's does.
 */
export class ObjectDeletedError extends NotFoundError {
  readonly deletedAt: string;

  constructor(reason: string, deletedAt: string) {
    super(reason);
    this.name = 'ObjectDeletedError';
    this.deletedAt = deletedAt;
  }
}

/** One entry of a 422 `detail` list, as the hosted service (FastAPI/pydantic) writes it. */
export interface ValidationIssue {
  readonly type: string;
  /** Starts with "body". */
  readonly loc: ReadonlyArray<string | number>;
  readonly msg: string;
  readonly input: unknown;
}

/** 422: the body does not match the schema. Body: `{"detail": [ValidationIssue, ...]}`. */
export class ValidationError extends HttpError {
  readonly detail: readonly ValidationIssue[];

  constructor(detail: readonly ValidationIssue[]) {
    super(422, detail[0]?.msg ?? 'Validation error');
    this.name = 'ValidationError';
    this.detail = detail;
  }
}
