/**
 * The public names of `callbridge`, listed one by one. The local server is not here: it lives
 * behind `callbridge/server` so that importing this entry never loads SQLite or the HTTP framework.
 */

// Exporter + register().
export { CallbridgeExporter } from './exporter/index.js';
export { register } from './exporter/register.js';
export type { RegisterOptions, Tracing } from './exporter/register.js';
export type { DeliveryStats, DropReason } from './batcher/index.js';

// Trace wrapper.
export { trace, traced, withThread, setCallAttributes } from './trace/index.js';
export type { TraceOptions, TracedDecorator, ThreadOptions, RedactOption } from './trace/index.js';

// Client.
export { createClient } from './client/index.js';
export type {
  CallbridgeClient,
  RequestOptions,
  CallsCompleteInput,
  CallsQueryInput,
  FileCreateInput,
  HealthRes,
  ServerInfoRes,
  EmptyRes,
} from './client/index.js';

// Wire types (type-only: the schemas themselves stay on the server's side).
export type { StartedCall, EndedCall, UpsertItem, CompletedCall, Call, CallWithColumns } from './wire/calls.js';
export type { Feedback } from './wire/feedback.js';
export type { Thread } from './wire/threads.js';
export type { ObjSchema } from './wire/objects.js';

// Options and errors.
export { DEFAULTS, DEFAULT_BASE_URL } from './options.js';
export type { ConnectionOptions, DeliveryOptions, DeliveryThread, ExporterOptions } from './options.js';
export type { LogLevel } from './log.js';
export {
  CallbridgeError,
  InvalidOptionError,
  CallbridgeHttpError,
  AuthError,
  RequestRejectedError,
  NotFoundError,
  RequestTooLargeError,
  ServerError,
  NetworkError,
  TimeoutError,
  UnexpectedResponseError,
} from './errors.js';
export type { HttpErrorData } from './errors.js';
