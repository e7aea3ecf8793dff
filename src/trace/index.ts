export { trace } from './trace.js';
export type { TraceOptions } from './trace.js';
export { traced } from './decorator.js';
export type { TracedDecorator } from './decorator.js';
export { withThread, setCallAttributes } from './call-context.js';
export type { ThreadOptions } from './call-context.js';
export { isSecretKey, REDACTED } from './redact.js';
export type { RedactOption } from './redact.js';
export { DEFAULT_MAX_VALUE_BYTES } from './capture.js';
