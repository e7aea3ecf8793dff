/**
 * `@traced(options?)`: `trace()` for class methods, for both decorator dialects TypeScript
 * compiles. The dialect is told apart by the arguments the runtime passes:
 * - standard (TC39) decorators: `(method, context)` with `context.kind === 'method'`; the
 *   replacement method is returned;
 * - `experimentalDecorators`: `(prototypeOrClass, propertyKey, descriptor)`; the descriptor's
 *   `value` is replaced and the descriptor returned.
 * The span name defaults to the method name (SPEC §5: `options.name ?? fn.name`, and a method's
 * own `name` is its key); private methods keep their `#`.
 */
import { InvalidOptionError, ReceivedDescription } from '../errors.js';
import type { TraceOptions } from './trace.js';
import { checkTraceOptions, trace } from './trace.js';

type Method<This, Args extends unknown[], Return> = (this: This, ...args: Args) => Return;

/** The function `traced(options)` returns; callable in either decorator dialect. */
export interface TracedDecorator {
  /** Standard (TC39) method decorator. */
  <This, Args extends unknown[], Return>(
    method: Method<This, Args, Return>,
    context: ClassMethodDecoratorContext<This, Method<This, Args, Return>>,
  ): Method<This, Args, Return>;
  /** `experimentalDecorators` method decorator. */
  <T>(target: object, propertyKey: string | symbol, descriptor: TypedPropertyDescriptor<T>): TypedPropertyDescriptor<T>;
}

/**
 * Trace every call of the decorated method (one span per call, `this` preserved).
 *
 * @example
 * class Agent {
 *   @traced({ kind: 'agent' })
 *   async plan(goal: string) { ... }
 * }
 */
export function traced(options: TraceOptions = {}): TracedDecorator {
  // Checked here, where the mistake is written, not first when a class is defined.
  checkTraceOptions(options);
  const decorate = (value: unknown, contextOrKey: unknown, descriptor?: PropertyDescriptor): unknown => {
    if (isStandardContext(contextOrKey)) {
      if (contextOrKey.kind !== 'method') {
        throw new InvalidOptionError('@traced target', 'a method', new ReceivedDescription(withArticle(contextOrKey.kind)));
      }
      return trace(value as (...args: unknown[]) => unknown, withName(options, contextOrKey.name));
    }
    if (descriptor === undefined || typeof descriptor.value !== 'function') {
      throw new InvalidOptionError('@traced target', 'a method', new ReceivedDescription(descriptor?.get || descriptor?.set ? 'an accessor' : 'a property'));
    }
    descriptor.value = trace(descriptor.value as (...args: unknown[]) => unknown, withName(options, contextOrKey as string | symbol));
    return descriptor;
  };
  return decorate as TracedDecorator;
}

/** `a getter`, `an accessor`: the kinds a decorator context names (`class`, `field`, ...). */
function withArticle(kind: string): string {
  return `${/^[aeiou]/i.test(kind) ? 'an' : 'a'} ${kind}`;
}

function isStandardContext(value: unknown): value is ClassMemberDecoratorContext {
  return typeof value === 'object' && value !== null && typeof (value as { kind?: unknown }).kind === 'string';
}

function withName(options: TraceOptions, key: string | symbol): TraceOptions {
  if (options.name !== undefined) return options;
  return { ...options, name: typeof key === 'symbol' ? (key.description ?? 'anonymous') : key };
}
