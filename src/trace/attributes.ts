/**
 * The span attributes the wrapper writes. Each is read by the span -> call mapping (SPEC §3),
 * which is also how the hosted service converts OTLP spans, so a traced call reads the same there.
 */

/** JSON text of `{<parameter name>: value}`; becomes the call's `inputs`. */
export const INPUTS = 'inputs';
/** The result (JSON text for objects and lists); becomes the call's `output`. */
export const OUTPUT = 'output';
/**
 * Where a result goes whose `value` member the mapping would take for the whole output: its
 * lookup `output.value` (SPEC §3) comes before `output` and reaches into `output`'s JSON.
 */
export const OUTPUTS = 'outputs';
/** `options.kind`; becomes `attributes.kind`. */
export const SPAN_KIND = 'weave.span.kind';
/** `options.displayName`; becomes the call's `display_name`. */
export const DISPLAY_NAME = 'wandb.display_name';
/** `withThread(threadId, ...)`; becomes the call's `thread_id`. */
export const THREAD_ID = 'wandb.thread_id';
/** True on the outermost call of a turn; the call's `turn_id` is then its own id. */
export const IS_TURN = 'wandb.is_turn';
/** JSON text merged into the call's `attributes` (`setCallAttributes`). */
export const CALL_ATTRIBUTES = 'wandb.attributes';
/** How a streamed call ended when it did not run to completion: `cancelled` or `abandoned`. */
export const STREAM_END = 'callbridge.stream.end';
