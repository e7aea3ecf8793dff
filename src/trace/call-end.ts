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

  /** End this call as `abandoned` (with `output()`) if `target` is collected before it ends. */
  watch(target: object, output: () => unknown): void {
    if (this.#done || this.#watched !== undefined) return;
    const watched = { end: this, output };
    this.#watched = watched;
    abandoned.register(target, watched, this);
    open.add(watched);
  }

  #unwatch(): void {
    if (this.#watched === undefined) return;
    abandoned.unregister(this);
    open.delete(this.#watched);
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

// A stream or thenable that its caller drops without finishing would otherwise keep its span open
// forever (the known gap of wrappers that end spans only in `finally`). When the object is
// collected, the call ends as `abandoned` with what it produced so far.
const abandoned = new FinalizationRegistry<Watched>(({ end, output }) => {
  end.succeed(safely(output), 'abandoned');
});

/** Watched calls not yet ended (held as the registry holds them: never their stream itself). */
const open = new Set<Watched>();

/**
 * Ends every watched call still open (a stream not read to its end, a returned thenable not yet
 * settled) as `unfinished`, with what it produced so far; returns how many. For the tracing's
 * shutdown and the process's last flush: after them such a call could never end, and its span,
 * never ended, would be lost without a word. Never throws.
 */
export function endOpenCalls(): number {
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
