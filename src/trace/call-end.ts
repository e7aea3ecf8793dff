/**
 * The end of one traced call: writes the output or the error and ends the span, exactly once,
 * whichever of success, failure, cancellation or abandonment comes first.
 */
import { SpanStatusCode } from '@opentelemetry/api';
import type { Span } from '@opentelemetry/api';
import { OUTPUT, OUTPUTS, STREAM_END } from './attributes.js';
import type { CapturePolicy } from './capture.js';
import { noteOnCall } from './call-context.js';
import { capture, captureText, messageOf } from './capture.js';

/**
 * How a streamed call stopped early: the consumer broke off, dropped the stream unread, or the
 * tracing shut down (or the process came to its end) with the stream still open.
 */
export type EarlyEnd = 'cancelled' | 'abandoned' | 'unfinished';

/** A watched call (see `CallEnd.watch`): its end, and how to read its output so far. */
interface Watched {
  readonly end: CallEnd;
  readonly output: () => unknown;
}

export class CallEnd {
  #done = false;
  #watched: Watched | undefined;
  /** Its promise while it waits to be watched (`watchPending`). */
  #pending: PendingCall | undefined;

  constructor(
    private readonly span: Span,
    private readonly policy: CapturePolicy,
    private readonly captureOutput: boolean,
  ) {}

  get done(): boolean {
    return this.#done;
  }

  /** End the span with `output` as the call's output. Never throws. */
  succeed(output: unknown, early?: EarlyEnd): void {
    if (this.#done) return;
    this.#done = true;
    this.#unwatch();
    try {
      if (this.captureOutput) writeOutput(this.span, output, this.policy);
      if (early !== undefined) {
        this.span.setAttribute(STREAM_END, early);
        // Also among the call's attributes (`wandb.attributes`, merged with what the function set),
        // where the service shows it: the span attribute alone reaches only `otel_dump`.
        noteOnCall(this.span, { stream: { end: early } });
      }
    } catch {
      // Capture is best effort; the span still ends below.
    }
    this.span.end();
  }

  /**
   * Record `error` (exception event, status ERROR with its message) and end the span; `output`,
   * when given, is what the call produced before it failed (a stream's chunks read before the
   * error), written as a success's would be. Never throws.
   */
  fail(error: unknown, output?: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#unwatch();
    try {
      if (this.captureOutput && output !== undefined) writeOutput(this.span, output, this.policy);
    } catch {
      // Capture is best effort; the error below is what matters.
    }
    // Each step on its own: a hostile thrown value (a Proxy whose traps throw, an Error whose
    // `message` getter throws inside recordException) must neither replace the user's error nor
    // leave the call reading as a success.
    let message = 'error';
    try {
      message = thrownText(error, this.policy);
    } catch {
      // The status below still says the call failed.
    }
    try {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message });
    } catch {
      // Nothing more to do: the span still ends below.
    }
    try {
      this.span.recordException(error instanceof Error || typeof error === 'string' ? error : { name: typeof error, message });
    } catch {
      try {
        this.span.recordException({ name: typeof error, message });
      } catch {
        // The status already carries the message.
      }
    }
    this.span.end();
  }

  /**
   * End this call as `abandoned` (with `output()`) if `target` is collected before it ends, and as
   * `unfinished` by `endOpenCalls`. A later watch replaces an earlier one: a thenable or promise
   * that resolved to a stream is done with, and the stream is what the caller now holds.
   */
  watch(target: object, output: () => unknown): void {
    if (this.#done) return;
    this.#unwatch();
    const watched = { end: this, output };
    this.#watched = watched;
    abandoned.register(target, watched, this);
    open.add(watched);
  }

  /**
   * Watch `promise`, the call's pending result (an async function's), as `watch` does, with no
   * output, once the call has waited for it `PENDING_WATCHED_AFTER_MS`: collected, nothing can
   * settle it any more (an async function awaiting what nothing will resolve), and the call ends
   * as `abandoned`; still pending at `endOpenCalls`, it ends as `unfinished`. Until it is watched
   * the promise is held here: one that can still settle is held by what will settle it anyway,
   * and one that cannot is collected a little later. Never throws: watching is a safety net, and
   * the call goes on without it.
   */
  watchPending(promise: Promise<unknown>): void {
    if (this.#done) return;
    const pending = { end: this, promise };
    this.#pending = pending;
    recentlyPending.push(pending);
    try {
      if (recentlyPending.length >= dropSettledAt) dropSettled();
      if (pendingTimer === undefined) startPendingTimer();
    } catch {
      // A patched `setTimeout` that failed: the calls listed are watched at the next one that works.
    }
  }

  #unwatch(): void {
    const pending = this.#pending;
    if (pending !== undefined) {
      // Its entry stays in a list until the next tick, holding neither the call nor the promise.
      this.#pending = undefined;
      pending.end = undefined;
      pending.promise = undefined;
    }
    if (this.#watched === undefined) return;
    abandoned.unregister(this);
    open.delete(this.#watched);
    this.#watched = undefined;
  }
}

/**
 * The `output` attribute: strings, numbers and booleans as themselves (so the mapping of SPEC §3
 * gives the call that exact output; JSON text of a string would read back with its quotes),
 * everything else as JSON text, except a value that captures as a string (a bigint's digits, a
 * Date's ISO text, a Buffer's base64, a stream's `"[Readable]"`), which is written as that string
 * for the same reason. `undefined`/`null` write nothing: the call's output is then null.
 *
 * A result with a `value` member (or JSON text of one) goes to `outputs` instead: the mapping
 * looks up `output.value` before `output`, reaching into `output`'s JSON, so
 * `{value: 0.9, reason: 'ok'}` would read back as `{"output.value": 0.9}`. `outputs`, like
 * `output`, gives the bare value, and no lookup reaches into it.
 *
 * A string that is JSON text of an object or list reads back parsed, and no encoding avoids it:
 * the mapping parses every such attribute string, and only `output`/`outputs` give a bare output
 * (any other key wraps the value as `{key: value}`). Documented on `TraceOptions.captureOutput`.
 */
function writeOutput(span: Span, output: unknown, policy: CapturePolicy): void {
  switch (typeof output) {
    case 'undefined':
      return;
    case 'string': {
      const text = captureText(output, policy.maxValueBytes);
      span.setAttribute(attributeForText(text), text);
      return;
    }
    case 'number':
      span.setAttribute(OUTPUT, Number.isFinite(output) ? output : String(output));
      return;
    case 'boolean':
      span.setAttribute(OUTPUT, output);
      return;
    default: {
      if (output === null) return;
      const { value, json } = capture(output, policy);
      if (typeof value === 'string') span.setAttribute(attributeForText(value), value);
      else span.setAttribute(hasValueMember(value) ? OUTPUTS : OUTPUT, json);
    }
  }
}

/** `outputs` for text the mapping would parse into an object with a `value` member, else `output`. */
function attributeForText(text: string): string {
  if (!text.startsWith('{')) return OUTPUT;
  try {
    return hasValueMember(JSON.parse(text)) ? OUTPUTS : OUTPUT;
  } catch {
    return OUTPUT;
  }
}

function hasValueMember(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.hasOwn(value, 'value');
}

/** Longest text a thrown value that is no Error is written as (the call's `exception`). */
const MAX_THROWN_TEXT_BYTES = 1024;

/**
 * What a thrown value says, for the span's status message (the call's `exception`, SPEC §3): an
 * Error's message, a string itself, an object's own `message` text if it has one, otherwise its
 * JSON as capture writes it (`{"code":42}`, secrets masked by the call's redaction), never
 * `"[object Object]"`.
 */
function thrownText(error: unknown, policy: CapturePolicy): string {
  if (error instanceof Error || typeof error !== 'object' || error === null) return messageOf(error);
  try {
    const message = (error as { message?: unknown }).message;
    if (typeof message === 'string' && message !== '') return message;
  } catch {
    // A getter that throws: the JSON below says what can be read.
  }
  return capture(error, { ...policy, maxValueBytes: Math.min(policy.maxValueBytes, MAX_THROWN_TEXT_BYTES) }).json;
}

// A stream, thenable or promise that its caller drops without finishing (or that nothing can
// settle any more) would otherwise keep its span open forever (the known gap of wrappers that end
// spans only in `finally`). When the object is collected, the call ends as `abandoned` with what
// it produced so far.
const abandoned = new FinalizationRegistry<Watched>(({ end, output }) => {
  end.succeed(safely(output), 'abandoned');
});

/** Watched calls not yet ended (held as the registry holds them: never their stream itself). */
const open = new Set<Watched>();

/**
 * How long an async call's promise is pending, at least, before it is watched (`watchPending`);
 * at most twice that. Most calls settle sooner and are never registered with the
 * FinalizationRegistry, which is what costs. CPU per `trace(async fn)` call, a function that
 * settles at once / one that awaits a turn of the event loop (medians of 8 runs, 2026-12-06):
 * 2.71 / 4.19 µs unwatched (a bare `startActiveSpan` around it: 2.07 / 3.54); every promise
 * registered at once 6.43 / 8.26 µs, mostly in the collector (10 full GCs in a run instead of
 * 1); registered on the next turn 3.09 / 6.73; this way 2.76 / 4.33. A call that runs longer (a
 * model's answer) does not notice the registration.
 */
export const PENDING_WATCHED_AFTER_MS = 500;

/** A call waiting for its promise, not yet watched; both emptied when it ends or is watched. */
interface PendingCall {
  end: CallEnd | undefined;
  promise: Promise<unknown> | undefined;
}

/**
 * The calls of `watchPending`: those that started since the timer's last tick, and those of the
 * tick before, which the next tick watches if they still wait. Lists rather than a map keyed by
 * the call: its insert and delete cost each call about 0.4 µs more.
 */
let recentlyPending: PendingCall[] = [];
let longPending: PendingCall[] = [];
let pendingTimer: ReturnType<typeof setTimeout> | undefined;

/**
 * Length of `recentlyPending` at which the entries of calls that have ended are dropped: a loop
 * that never lets the timer fire (awaits of settled promises only) would otherwise grow it
 * without bound. Doubled while most of its calls still wait.
 */
const DROP_SETTLED_AT = 1024;
let dropSettledAt = DROP_SETTLED_AT;

function dropSettled(): void {
  recentlyPending = recentlyPending.filter((pending) => pending.end !== undefined);
  dropSettledAt = Math.max(DROP_SETTLED_AT, 2 * recentlyPending.length);
}

function startPendingTimer(): void {
  pendingTimer = setTimeout(watchLongPending, PENDING_WATCHED_AFTER_MS);
  // A traced call still waiting must not keep the process alive; the exit flush ends it. (Not
  // every `setTimeout` returns a Node timer: jsdom's and some fake timers return a number.)
  pendingTimer.unref?.();
}

/** Watch the calls still waiting since the tick before; the recent ones wait for the next tick. */
function watchLongPending(): void {
  pendingTimer = undefined;
  const due = longPending;
  longPending = recentlyPending;
  recentlyPending = [];
  dropSettledAt = DROP_SETTLED_AT;
  watchAll(due);
  if (longPending.length > 0) startPendingTimer();
}

function watchAll(calls: readonly PendingCall[]): void {
  for (const { end, promise } of calls) {
    if (end !== undefined) end.watch(promise!, noOutputYet);
  }
}

function noOutputYet(): undefined {
  return undefined;
}

/**
 * Ends every watched call still open (a stream not read to its end, a returned thenable or
 * promise not yet settled) as `unfinished`, with what it produced so far; returns how many. For
 * the tracing's shutdown and the process's last flush: after them such a call could never end,
 * and its span, never ended, would be lost without a word. Never throws.
 */
export function endOpenCalls(): number {
  watchAll(longPending);
  watchAll(recentlyPending);
  longPending = [];
  recentlyPending = [];
  let ended = 0;
  for (const { end, output } of [...open]) {
    end.succeed(safely(output), 'unfinished');
    ended++;
  }
  return ended;
}

function safely(output: () => unknown): unknown {
  try {
    return output();
  } catch (error) {
    return `[output failed: ${messageOf(error)}]`;
  }
}
