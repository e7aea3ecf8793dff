/**
 * What travels with the active context besides the span: the conversation thread a call belongs to
 * (`withThread`), and the `wandb.attributes` of the current call (`setCallAttributes`).
 */
import { context, createContextKey, trace as otelTrace } from '@opentelemetry/api';
import type { Context, Span } from '@opentelemetry/api';
import { InvalidOptionError, rejectUnknownOptions } from '../errors.js';
import { CALL_ATTRIBUTES, IS_TURN, THREAD_ID } from './attributes.js';
import { capture, DEFAULT_MAX_VALUE_BYTES, type CapturePolicy } from './capture.js';
import { compileRedactor } from './redact.js';

interface ThreadScope {
  readonly threadId: string;
  /** True until the first traced call inside takes the turn; its descendants see `false`. */
  readonly turn: boolean;
  /** Threads whose turn a call above took: a `withThread` of one of them here starts no new turn. */
  readonly turnsTaken: readonly string[];
}

const THREAD_KEY = createContextKey('callbridge.thread');

/** Options of `withThread`. */
export interface ThreadOptions {
  /**
   * Whether the outermost traced call inside is a turn of the conversation (`wandb.is_turn`, which
   * makes its id the call's `turn_id`). Calls nested inside a turn are never turns themselves.
   * @default true
   */
  readonly turn?: boolean;
}

/**
 * Run `fn` with every traced call inside it grouped into the conversation `threadId`.
 * Returns what `fn` returns (a promise stays a promise; the thread follows it across `await`).
 *
 * @example
 * await withThread(sessionId, () => agent.reply(message));
 */
export function withThread<R>(threadId: string, fn: () => R, options: ThreadOptions = {}): R {
  if (typeof threadId !== 'string' || threadId === '') {
    throw new InvalidOptionError('threadId', 'a non-empty string', threadId);
  }
  if (typeof fn !== 'function') throw new InvalidOptionError('fn', 'a function (the code to run in the thread)', fn);
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'an object', options);
  rejectUnknownOptions(options, ['turn']);
  const turn = options.turn ?? true;
  if (typeof turn !== 'boolean') throw new InvalidOptionError('turn', 'a boolean', turn);
  // A helper that scopes its own work to the conversation, called inside a turn, is part of that
  // turn: one message stays one turn. Another conversation (a sub-agent's) has turns of its own.
  const turnsTaken = (context.active().getValue(THREAD_KEY) as ThreadScope | undefined)?.turnsTaken ?? [];
  const scope: ThreadScope = { threadId, turn: turn && !turnsTaken.includes(threadId), turnsTaken };
  return context.with(context.active().setValue(THREAD_KEY, scope), fn);
}

/**
 * Write the thread attributes of a new span created under `parent`, and return the context its
 * body runs in (the turn is taken: nested calls are in the thread but are not turns).
 */
export function enterThread(span: Span, parent: Context, spanContext: Context): Context {
  const scope = parent.getValue(THREAD_KEY) as ThreadScope | undefined;
  if (scope === undefined) return spanContext;
  span.setAttribute(THREAD_ID, scope.threadId);
  span.setAttribute(IS_TURN, scope.turn);
  if (!scope.turn) return spanContext;
  const inner: ThreadScope = { threadId: scope.threadId, turn: false, turnsTaken: [...scope.turnsTaken, scope.threadId] };
  return spanContext.setValue(THREAD_KEY, inner);
}

// What `setCallAttributes` has written per span, so later calls merge instead of replacing
// (the OTel API has no attribute getter). Weak: it never outlives the span.
const writtenAttributes = new WeakMap<Span, Record<string, unknown>>();
const ATTRIBUTE_POLICY: CapturePolicy = { maxValueBytes: DEFAULT_MAX_VALUE_BYTES, redactor: compileRedactor(undefined) };
// The capture policy of calls traced with their own `redact` or `maxValueBytes`, so what they set
// as attributes is masked as their inputs are. Calls with the defaults are not listed.
const callPolicies = new WeakMap<Span, CapturePolicy>();

/** Capture what `setCallAttributes` adds to `span` with `policy` (the call's own options). */
export function useCallPolicy(span: Span, policy: CapturePolicy): void {
  callPolicies.set(span, policy);
}

/**
 * Add `attributes` to the current call's `attributes` (span attribute `wandb.attributes`, merged
 * with what earlier calls set; later keys win). Values are captured like inputs (safe copy, keys
 * masked by the call's `redact`, else by the default rule). Does nothing outside a recording
 * span. Never throws.
 *
 * @example
 * setCallAttributes({ env: 'prod', userTier: 'free' });
 */
export function setCallAttributes(attributes: Record<string, unknown>): void {
  const span = otelTrace.getSpan(context.active());
  if (span !== undefined) addCallAttributes(span, attributes);
}

/**
 * The wrapper's own note on a call (how a stream ended), under the call attribute `callbridge`,
 * merged with what that member already holds (`setCallAttributes({ callbridge: {...} })` keeps
 * its keys). Written when the call ends, outside its context. Never throws.
 *
 * @example
 * noteOnCall(span, { stream: { end: 'cancelled' } }); // attributes.callbridge.stream.end
 */
export function noteOnCall(span: Span, note: Record<string, unknown>): void {
  const earlier = writtenAttributes.get(span)?.callbridge;
  const merged = typeof earlier === 'object' && earlier !== null && !Array.isArray(earlier) ? { ...earlier, ...note } : note;
  addCallAttributes(span, { callbridge: merged });
}

/**
 * `setCallAttributes` for a given span. Does nothing once the span has ended. Never throws.
 */
export function addCallAttributes(span: Span, attributes: Record<string, unknown>): void {
  try {
    if (!span.isRecording()) return;
    const policy = callPolicies.get(span) ?? ATTRIBUTE_POLICY;
    const captured = capture(attributes, policy).value;
    if (captured === null || typeof captured !== 'object' || Array.isArray(captured)) return;
    const merged = { ...writtenAttributes.get(span), ...(captured as Record<string, unknown>) };
    const { value, json } = capture(merged, policy);
    writtenAttributes.set(span, value as Record<string, unknown>);
    span.setAttribute(CALL_ATTRIBUTES, json);
  } catch {
    // Attributes are observability; never an error in the caller's code path.
  }
}
