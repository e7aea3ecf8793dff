/**
 * `trace(fn)`: one span per call of `fn` (SPEC §5), without changing what `fn` does: same `this`,
 * same arguments, same return value, same thrown object; the span ends exactly once.
 */
import { context, INVALID_SPAN_CONTEXT, isSpanContextValid, trace as otelTrace } from '@opentelemetry/api';
import type { Context, Span, Tracer, TracerProvider } from '@opentelemetry/api';
import { InvalidOptionError, rejectUnknownOptions } from '../errors.js';
import { DISPLAY_NAME, INPUTS, SPAN_KIND } from './attributes.js';
import { enterThread, useCallPolicy } from './call-context.js';
import { CallEnd } from './call-end.js';
import type { CapturePolicy } from './capture.js';
import { DEFAULT_MAX_VALUE_BYTES } from './capture.js';
import { compileInputs, type InputsText } from './inputs.js';
import { readParams } from './params.js';
import type { RedactOption, Redactor } from './redact.js';
import { compileRedactor } from './redact.js';
import { instrumentStream, observeIteration, streamShape, type ChunkPolicy } from './streams.js';

/** Options of `trace(fn, options)` and `@traced(options)`. */
export interface TraceOptions {
  /**
   * Span (and op) name.
   * @default `fn.name`, else `'anonymous'` (for `@traced`, the method name)
   */
  readonly name?: string;
  /** Sets `weave.span.kind` (the call's `attributes.kind`), e.g. `'llm'`, `'tool'`, `'agent'`. */
  readonly kind?: string;
  /** Sets `wandb.display_name` (the call's `display_name`). */
  readonly displayName?: string;
  /**
   * Builds a streamed call's output from its chunks (of a generator, an async iterable or a web
   * `ReadableStream`). Every chunk is kept until the call ends when it is given.
   * @default the list of chunks, at most 1000 and, of text and bytes, about `maxValueBytes`
   * (later ones are counted in a marker)
   */
  readonly reduce?: (chunks: unknown[]) => unknown;
  /**
   * Masking of captured values: keys, a function, or `false`. See `RedactOption`.
   * @default keys that look like secrets (`api_key`, `password`, `access_token`, ...) -> `"[REDACTED]"`
   */
  readonly redact?: RedactOption;
  /**
   * Largest JSON text of the captured inputs, and of the output; bigger values are sized down.
   * @default 262144 (256 KiB)
   */
  readonly maxValueBytes?: number;
  /**
   * Capture arguments as the call's inputs. Turn off for functions whose arguments are private.
   * @default true
   */
  readonly captureInputs?: boolean;
  /**
   * Capture the result as the call's output. Strings, numbers and booleans are written as
   * themselves, other values as JSON text (in `outputs` rather than `output` for an object with a
   * `value` member or JSON text of one, which the mapping would otherwise take alone). One case
   * cannot round-trip: a returned string that is itself JSON text of an object or list (it starts
   * with `{` or `[` and parses, e.g. a model's JSON-mode answer `'{"answer": 42}'`) shows in the
   * call as the parsed value (`{answer: 42}`), because the span -> call mapping shared with the
   * hosted service parses such strings. The caller still gets the string unchanged; any other
   * string (`'{"answer": 4'`, `'"x"'`) stays text.
   * @default true
   */
  readonly captureOutput?: boolean;
}

/** Everything about one traced function that does not change between calls. */
interface TracedCall {
  readonly fn: Function;
  readonly name: string;
  readonly kind: string | undefined;
  readonly displayName: string | undefined;
  readonly reduce: ((chunks: unknown[]) => unknown) | undefined;
  readonly policy: CapturePolicy;
  /** Whether `policy` differs from the default (then `setCallAttributes` in the call uses it too). */
  readonly customPolicy: boolean;
  readonly captureInputs: boolean;
  readonly captureOutput: boolean;
  /**
   * Compiled on the first recording call: a function never called with a provider never has its
   * parameters read.
   */
  inputs: InputsText | undefined;
}

const TRACER_NAME = 'callbridge';

let tracerProvider: TracerProvider | undefined;
let tracer: Tracer | undefined;

/**
 * The tracer of the current global provider. Cached per provider object: the API's global is a
 * proxy that stays the same object when a provider registers, and is replaced by `trace.disable()`.
 */
function currentTracer(): Tracer {
  const provider = otelTrace.getTracerProvider();
  if (provider !== tracerProvider || tracer === undefined) {
    tracerProvider = provider;
    tracer = provider.getTracer(TRACER_NAME);
  }
  return tracer;
}

/** The function each wrapper wraps, so wrapping a wrapper reads the first function's parameters. */
const wrappedFunctions = new WeakMap<Function, Function>();

/** Own properties of a function that the wrapper has of its own, or that cannot be copied. */
const OWN_FUNCTION_PROPERTIES: ReadonlySet<string | symbol> = new Set(['name', 'length', 'prototype', 'arguments', 'caller']);

/**
 * Wrap `fn` so every call is a span (a call record once exported): inputs by parameter name,
 * output, errors, and streams consumed later. The returned function has `fn`'s type, `name`,
 * `length` and own properties (a tool's `description`, a class's static members), copied when
 * `trace()` runs, and `fn`'s prototype: an async function's wrapper is an `AsyncFunction` by its
 * constructor and tag, a traced subclass inherits its base's static members. It is a
 * constructor only when `fn` is one (an arrow or async function's wrapper has no `prototype`).
 *
 * @example
 * const answer = trace(async function answer(question: string) {
 *   return llm.complete(question);
 * }, { kind: 'llm' });
 * await answer('Why is the sky blue?');
 */
export function trace<F extends (...args: any[]) => any>(fn: F, options: TraceOptions = {}): F {
  if (typeof fn !== 'function') throw new InvalidOptionError('fn', 'a function', fn);
  const call = compileCall(fn, options);
  const traced = isConstructor(fn)
    ? function (this: unknown, ...args: unknown[]): unknown {
        return runTraced(call, this, args, new.target);
      }
    : // A method: no `prototype`, and `new` on it throws, as on `fn`.
      {
        traced(this: unknown, ...args: unknown[]): unknown {
          return runTraced(call, this, args, undefined);
        },
      }.traced;
  Object.defineProperty(traced, 'name', { value: fn.name, configurable: true });
  Object.defineProperty(traced, 'length', { value: fn.length, configurable: true });
  // `new traced()` must build an instance of `fn` (Reflect.construct takes the prototype from
  // new.target, which is the wrapper).
  if (fn.prototype !== undefined) traced.prototype = fn.prototype;
  inheritPrototype(fn, traced);
  copyOwnProperties(fn, traced);
  wrappedFunctions.set(traced, wrappedFunctions.get(fn) ?? fn);
  return traced as unknown as F;
}

/** Whether `new fn()` is allowed (without calling `fn`: it is only the new target here). */
function isConstructor(fn: Function): boolean {
  try {
    Reflect.construct(Object, [], fn);
    return true;
  } catch {
    return false;
  }
}

/** The wrapper takes `fn`'s prototype (AsyncFunction.prototype, a base class). Never throws. */
function inheritPrototype(fn: Function, traced: Function): void {
  try {
    Object.setPrototypeOf(traced, Object.getPrototypeOf(fn) as object | null);
  } catch {
    // A Proxy's trap threw: the wrapper stays a plain function, the call itself still works.
  }
}

/** `fn`'s own properties onto its wrapper: its type (F) says they are there. Never throws. */
function copyOwnProperties(fn: Function, traced: Function): void {
  for (const key of Reflect.ownKeys(fn)) {
    if (OWN_FUNCTION_PROPERTIES.has(key)) continue;
    try {
      const descriptor = Object.getOwnPropertyDescriptor(fn, key);
      if (descriptor !== undefined) Object.defineProperty(traced, key, descriptor);
    } catch {
      // A property the wrapper cannot take (a Proxy's trap threw): the call itself still works.
    }
  }
}

function compileCall(fn: Function, options: TraceOptions): TracedCall {
  const { maxValueBytes, redactor, captureInputs, captureOutput } = checkTraceOptions(options);
  return {
    fn,
    name: options.name || fn.name || 'anonymous',
    kind: options.kind,
    displayName: options.displayName,
    reduce: options.reduce,
    policy: { maxValueBytes, redactor },
    customPolicy: options.redact !== undefined || options.maxValueBytes !== undefined,
    captureInputs,
    captureOutput,
    inputs: undefined,
  };
}

/**
 * Validate `options` of `trace()` (and of `@traced()`, when the decorator is made), naming the
 * option and the value received; returns the options that have defaults, resolved.
 */
export function checkTraceOptions(
  options: TraceOptions,
): { maxValueBytes: number; redactor: Redactor; captureInputs: boolean; captureOutput: boolean } {
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'an object', options);
  rejectUnknownOptions(options, TRACE_OPTION_KEYS);
  const maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
  if (!Number.isSafeInteger(maxValueBytes) || maxValueBytes < 64) {
    throw new InvalidOptionError('maxValueBytes', 'an integer of at least 64', maxValueBytes);
  }
  optionalString('name', options.name);
  optionalString('kind', options.kind);
  optionalString('displayName', options.displayName);
  if (options.reduce !== undefined && typeof options.reduce !== 'function') {
    throw new InvalidOptionError('reduce', 'a function', options.reduce);
  }
  // Checked like the others: `captureInputs: 'no'` would otherwise capture (a truthy string).
  return {
    maxValueBytes,
    redactor: compileRedactor(options.redact),
    captureInputs: optionalBoolean('captureInputs', options.captureInputs, true),
    captureOutput: optionalBoolean('captureOutput', options.captureOutput, true),
  };
}

/** Every option of `trace()` and `@traced()`, once (the compiler checks the list against `TraceOptions`). */
const TRACE_OPTION_KEYS = Object.keys({
  name: true, kind: true, displayName: true, reduce: true, redact: true, maxValueBytes: true, captureInputs: true, captureOutput: true,
} satisfies Record<keyof TraceOptions, true>);

function optionalString(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'string') throw new InvalidOptionError(name, 'a string', value);
}

/** A boolean option: its value, or `fallback` when not given. */
function optionalBoolean(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new InvalidOptionError(name, 'a boolean', value);
  return value;
}

function runTraced(call: TracedCall, thisArg: unknown, args: unknown[], newTarget: unknown): unknown {
  const parent = context.active();
  const span = currentTracer().startSpan(call.name, undefined, parent);
  if (!span.isRecording()) {
    // No provider, or sampled out: no capture work at all (SPEC §5). A sampled-out span still
    // becomes active, so that its children inherit the decision instead of starting new traces.
    const spanContext = span.spanContext();
    if (spanContext === INVALID_SPAN_CONTEXT || !isSpanContextValid(spanContext)) {
      return invoke(call.fn, thisArg, args, newTarget);
    }
    return context.with(otelTrace.setSpan(parent, span), invoke, undefined, call.fn, thisArg, args, newTarget);
  }
  const end = new CallEnd(span, call.policy, call.captureOutput);
  let ctx = otelTrace.setSpan(parent, span);
  try {
    ctx = describeCall(call, span, parent, ctx, args);
  } catch {
    // Describing the call is best effort; the call itself runs regardless.
  }
  let result: unknown;
  try {
    result = context.with(ctx, invoke, undefined, call.fn, thisArg, args, newTarget);
  } catch (error) {
    end.fail(error);
    throw error;
  }
  if (newTarget !== undefined) {
    // A constructor's instance is handed back as made, never observed (a thenable or
    // async-iterable instance is not the call's pending result).
    end.succeed(result);
    return result;
  }
  try {
    return settle(call, end, ctx, result);
  } catch (error) {
    // The result's own `then` threw (a promise subclass that cannot be chained): the caller gets
    // it untouched, as without tracing, and the call ends with that error.
    end.fail(error);
    return result;
  }
}

function invoke(fn: Function, thisArg: unknown, args: unknown[], newTarget: unknown): unknown {
  return newTarget === undefined ? Reflect.apply(fn, thisArg, args) : Reflect.construct(fn, args, newTarget as Function);
}

/** Attributes known when the call starts; returns the context the body runs in. */
function describeCall(call: TracedCall, span: Span, parent: Context, ctx: Context, args: unknown[]): Context {
  if (call.captureInputs) {
    call.inputs ??= compileInputs(readParams(wrappedFunctions.get(call.fn) ?? call.fn), call.policy);
    span.setAttribute(INPUTS, call.inputs(args));
  }
  if (call.customPolicy) useCallPolicy(span, call.policy);
  if (call.kind !== undefined) span.setAttribute(SPAN_KIND, call.kind);
  if (call.displayName !== undefined) span.setAttribute(DISPLAY_NAME, call.displayName);
  return enterThread(span, parent, ctx);
}

/**
 * What the caller gets back, with the span's end attached to it:
 * - a native promise: the promise its `then` returns (so an unhandled rejection stays unhandled),
 *   with the members the function put on it (ky's `ResponsePromise`: `.json()`) copied over;
 * - a promise subclass (an SDK's `APIPromise` with extra methods): the same object, observed
 *   (see observeSubclass for how its unhandled rejections stay unhandled);
 * - another thenable (often lazy: a query builder runs on each `then`): a proxy whose `then` is
 *   observed, so the work still runs once, when the caller awaits; its methods that return the
 *   builder itself return the proxy, so a chain (`.where(...).limit(10)`) stays observed; one
 *   that is also async-iterable (a Mongoose `Query`: `for await (const doc of Model.find())`)
 *   ends the call as a stream when it is iterated instead;
 * - a stream: the same object, instrumented (see streams.ts);
 * - anything else: the value itself, the span ended now.
 */
function settle(call: TracedCall, end: CallEnd, ctx: Context, result: unknown): unknown {
  if (result === null || typeof result !== 'object') {
    end.succeed(result);
    return result;
  }
  let then: unknown;
  try {
    then = (result as { then?: unknown }).then;
  } catch {
    then = undefined;
  }
  if (typeof then !== 'function') return settleValue(call, end, ctx, result);
  const onValue = (value: unknown): unknown => settleValue(call, end, ctx, value);
  const onError = (error: unknown): never => {
    end.fail(error);
    throw error;
  };
  if (result instanceof Promise) {
    if (Object.getPrototypeOf(result) === Promise.prototype) {
      end.watchPending(result);
      return withOwnMembers(result, result.then(onValue, onError));
    }
    return observeSubclass(result, onValue, onError, end);
  }
  // A `then` that cannot be replaced on a proxy (a frozen object's): the value is returned as it
  // is and the call ends now, as for any other object.
  if (isFixedMember(result, 'then')) return settleValue(call, end, ctx, result);
  const iterate = (iterator: AsyncIterator<unknown>, owner: object): AsyncIterator<unknown> =>
    observeIteration(iterator, owner, end, ctx, chunkPolicyOf(call));
  return observeThenable(result as PromiseLike<unknown>, onValue, (error) => end.fail(error), end, ctx, iterate);
}

/**
 * Whether `object` holds `key` as a non-configurable, non-writable data property: a proxy's `get`
 * must answer exactly that value for it (a frozen object's members, `Object.defineProperty`'s
 * defaults), or reading it throws.
 */
function isFixedMember(object: object, key: PropertyKey): boolean {
  try {
    const descriptor = Reflect.getOwnPropertyDescriptor(object, key);
    return descriptor !== undefined && descriptor.configurable === false && descriptor.writable === false;
  } catch {
    return false;
  }
}

/**
 * `observed` with the enumerable string-keyed members of `promise` copied onto it (methods a
 * library assigned to the promise it returns, which close over that promise: ky's `.json()`).
 * Not through observeSubclass: `await` of a native promise never reads its `then`, so an observer
 * there could not see the caller handle a rejection. Symbol keys are left: Node's
 * AsyncLocalStorage keeps its context on promises under a symbol.
 *
 * A caller who uses a member (`await get(url).json()`) handles the outcome through it and never
 * touches `observed`; untraced, the original promise's rejection is handled by the member's own
 * await. So calling a copied method marks `observed` handled, or its rejection would be reported
 * unhandled (and end the process by Node's default).
 */
function withOwnMembers(promise: Promise<unknown>, observed: Promise<unknown>): Promise<unknown> {
  for (const key of Object.keys(promise)) {
    try {
      const descriptor = Object.getOwnPropertyDescriptor(promise, key) as PropertyDescriptor;
      const member: unknown = descriptor.value;
      if (typeof member === 'function') {
        descriptor.value = function (this: unknown, ...args: unknown[]): unknown {
          nativeThen.call(observed, undefined, ignoreRejection);
          return Reflect.apply(member, this, args);
        };
      }
      Object.defineProperty(observed, key, descriptor);
    } catch {
      // A member that cannot be copied: the promise itself still settles as the function's did.
    }
  }
  return observed;
}

/** What a streamed call keeps of its chunks. */
function chunkPolicyOf(call: TracedCall): ChunkPolicy {
  return { reduce: call.reduce, maxKeptBytes: call.captureOutput ? call.policy.maxValueBytes : 0 };
}

/** End the call with a plain value, or hand a stream to streams.ts. Returns what the caller sees. */
function settleValue(call: TracedCall, end: CallEnd, ctx: Context, value: unknown): unknown {
  if (value !== null && typeof value === 'object') {
    let shape: ReturnType<typeof streamShape>;
    try {
      shape = streamShape(value);
    } catch {
      shape = undefined;
    }
    if (shape !== undefined) return instrumentStream(value, shape, end, ctx, chunkPolicyOf(call));
  }
  end.succeed(value);
  return value;
}

/**
 * A promise subclass is returned itself (its extra methods must survive), so it is observed with a
 * `then` of ours, which marks its rejection handled. To keep an unhandled rejection unhandled, as
 * on the native path, the observing chain re-throws: its promise rejects with the same reason and
 * stays unhandled unless the caller takes `promise` in hand. The first `then` the caller makes
 * (directly, or through `await`, `catch` or `finally`) marks the observing chain handled, so a
 * caller who handles the rejection sees no extra unhandled one.
 *
 * The call's pending result, watched in case nothing can settle it (`watchPending`), is the
 * observing chain, not `promise`: a subclass's `then` may chain on a promise of its own and keep
 * nothing of `promise` alive (OpenAI's and Anthropic's `APIPromise` chain on their response
 * promise), so once the caller has awaited it `promise` can be collected while the request runs.
 */
function observeSubclass(
  promise: Promise<unknown>,
  onValue: (value: unknown) => unknown,
  onError: (error: unknown) => never,
  end: CallEnd,
): Promise<unknown> {
  const then = promise.then;
  const observing = Reflect.apply(then, promise, [onValue, onError]) as Promise<unknown>;
  if (observing instanceof Promise) end.watchPending(observing);
  let claimed = false;
  const callerThen = function (this: unknown, onFulfilled?: unknown, onRejected?: unknown): unknown {
    if (!claimed) {
      claimed = true;
      // The native `then`: a subclass's own may expect state that species-made promises lack.
      nativeThen.call(observing, undefined, ignoreRejection);
    }
    return Reflect.apply(then, this, [onFulfilled, onRejected]);
  };
  try {
    Object.defineProperty(promise, 'then', { value: callerThen, configurable: true, writable: true, enumerable: false });
  } catch {
    // A frozen promise: the caller's handlers cannot be seen; rather miss an unhandled rejection
    // than report one the caller handles.
    nativeThen.call(observing, undefined, ignoreRejection);
  }
  return promise;
}

const nativeThen = Promise.prototype.then;

function ignoreRejection(): void {
  // The caller holds the rejection through the promise it was given.
}

function observeThenable(
  thenable: PromiseLike<unknown>,
  onValue: (value: unknown) => unknown,
  onError: (error: unknown) => void,
  end: CallEnd,
  ctx: Context,
  iterate: (iterator: AsyncIterator<unknown>, owner: object) => AsyncIterator<unknown>,
): PromiseLike<unknown> {
  let observed = false;
  const observedThen = function (
    this: unknown,
    onFulfilled?: ((value: unknown) => unknown) | null,
    onRejected?: ((reason: unknown) => unknown) | null,
  ): unknown {
    if (observed) return thenable.then(onFulfilled, onRejected);
    observed = true;
    let settled = false;
    // The caller's callbacks run in the caller's context, as they would without tracing.
    const callerCtx = context.active();
    try {
      // In the call's context: a lazy thenable does its work here (a query builder runs its
      // query), and the spans that work starts are the call's children.
      return context.with(ctx, () =>
        thenable.then(
          (value) => {
            settled = true;
            const seen = onValue(value);
            return typeof onFulfilled === 'function' ? context.with(callerCtx, onFulfilled, undefined, seen) : seen;
          },
          (reason: unknown) => {
            settled = true;
            onError(reason);
            if (typeof onRejected === 'function') return context.with(callerCtx, onRejected, undefined, reason);
            throw reason;
          },
        ),
      );
    } catch (error) {
      // A `then` that throws before settling is how this call failed. One that settled at once
      // and then threw carries the caller's own callback's error: the call already ended.
      // Either way the caller gets the throw as before.
      if (!settled) onError(error);
      throw error;
    }
  };
  const proxy: PromiseLike<unknown> = new Proxy(thenable as object, {
    get(target, property) {
      if (property === 'then') return observedThen;
      const member: unknown = Reflect.get(target, property, target);
      // A frozen member must be answered as it is (the proxy's invariant).
      if (typeof member !== 'function' || isFixedMember(target, property)) return member;
      if (property === Symbol.asyncIterator) {
        // Iterated instead of awaited: the first iterator taken before any `then` is the call's stream.
        return function (this: unknown): unknown {
          const iterator = context.with(ctx, () => Reflect.apply(member, target, []) as AsyncIterator<unknown>);
          if (observed || end.done) return iterator;
          observed = true;
          return iterate(iterator, proxy);
        };
      }
      // A fluent builder's method returns the builder itself (`query().where(...).limit(10)`):
      // hand back the proxy, so the chain's final `then` is still the observed one.
      return function (this: unknown, ...args: unknown[]): unknown {
        const returned: unknown = Reflect.apply(member, target, args);
        return returned === target ? proxy : returned;
      };
    },
  }) as PromiseLike<unknown>;
  end.watch(proxy, () => undefined);
  return proxy;
}
