/**
 * Reads parameter names from a function's source text (`fn.toString()`), so a traced call's
 * inputs read `{question: "..."}` rather than `{arg0: "..."}` (SPEC §5).
 *
 * A small scanner, not a parser: it only needs to find the parameter list and split it at
 * top-level commas, skipping strings, template literals, comments, regular expressions and nested
 * brackets (default values such as `b = f(1, "x,y")` or `sep = /,/`). Anything it cannot read yields `null` for that parameter
 * (destructuring) or for the whole list (native and bound functions), and the caller falls back to
 * `arg<index>`.
 */

/** One declared parameter: its name (null when destructured) and whether it is `...rest`. */
export interface ParamSpec {
  readonly name: string | null;
  readonly rest: boolean;
}

const IDENTIFIER = /^[\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*/u;
const SINGLE_PARAM_ARROW = /^(?:async\s+)?([\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*)\s*=>/u;

const cache = new WeakMap<Function, readonly ParamSpec[] | null>();

/**
 * The declared parameters of `fn`, or `null` when its source cannot be read. Cached per function.
 *
 * @example
 * readParams(function f(a, { b }, ...rest) {}) // [{name:'a'}, {name:null}, {name:'rest', rest:true}]
 */
export function readParams(fn: Function): readonly ParamSpec[] | null {
  const cached = cache.get(fn);
  if (cached !== undefined) return cached;
  let params: readonly ParamSpec[] | null;
  try {
    params = parseParams(Function.prototype.toString.call(fn));
  } catch {
    params = null;
  }
  cache.set(fn, params);
  return params;
}

/** Parse the parameter list out of a function's source text. Exported for tests. */
export function parseParams(source: string): readonly ParamSpec[] | null {
  const src = source.trimStart();
  if (src.includes('[native code]')) return null;
  const arrow = SINGLE_PARAM_ARROW.exec(src);
  if (arrow?.[1] !== undefined) return [{ name: arrow[1], rest: false }];
  // `class A {...}` or `class {...}`, not a method named `class` (`class(id) {...}`, an API client's).
  const open = /^class(?![\w$(])/.test(src) ? findConstructorParen(src) : findFirstParen(src);
  if (open < 0) return null;
  return splitParams(src, open).map(toParamSpec).filter((spec): spec is ParamSpec => spec !== undefined);
}

function toParamSpec(segment: string): ParamSpec | undefined {
  let text = stripCommentsAndSpace(segment);
  if (text === '') return undefined; // trailing comma
  const rest = text.startsWith('...');
  if (rest) text = stripCommentsAndSpace(text.slice(3));
  const name = IDENTIFIER.exec(text)?.[0] ?? null;
  return { name, rest };
}

/** Drop leading whitespace and comments. */
function stripCommentsAndSpace(text: string): string {
  let i = 0;
  for (;;) {
    while (i < text.length && /\s/.test(text[i]!)) i++;
    const after = skipComment(text, i);
    if (after === i) return text.slice(i);
    i = after;
  }
}

/** Index of the first `(` outside strings, comments and computed keys, or -1. */
function findFirstParen(src: string): number {
  // A body or `=>` before any `(`: unreadable.
  return scanCode(src, 0, '[', (ch, i) => (ch === '(' ? i : ch === '{' || ch === '=' ? -1 : undefined)) ?? -1;
}

/** Index of the `(` of `constructor(` directly inside the class body, or -1. */
function findConstructorParen(src: string): number {
  const bodyStart = findClassBody(src);
  if (bodyStart < 0) return -1;
  const found = scanCode(src, bodyStart + 1, '([{', (ch, i) => {
    if (ch === '}' || ch === ')' || ch === ']') return -1; // the class body ended: no constructor
    if (ch !== 'c' || !src.startsWith('constructor', i) || isIdentifierChar(src[i - 1])) return undefined;
    let j = i + 'constructor'.length;
    while (j < src.length && /\s/.test(src[j]!)) j++;
    return src[j] === '(' ? j : undefined;
  });
  return found ?? -1;
}

/** Index of the `{` that opens the class body (after `extends` expressions), or -1. */
function findClassBody(src: string): number {
  return scanCode(src, 'class'.length, '([', (ch, i) => (ch === '{' ? i : undefined)) ?? -1;
}

function isIdentifierChar(ch: string | undefined): boolean {
  return ch !== undefined && /[\p{ID_Continue}$]/u.test(ch);
}

/** The raw text of each top-level parameter between `(` at `open` and its matching `)`. */
function splitParams(src: string, open: number): string[] {
  const segments: string[] = [];
  let start = open + 1;
  const closed = scanCode(src, open + 1, '([{', (ch, i) => {
    if (ch !== ',' && ch !== ')') return undefined;
    segments.push(src.slice(start, i));
    start = i + 1;
    return ch === ')' ? true : undefined;
  });
  if (closed === undefined) throw new SyntaxError('unterminated parameter list');
  return segments;
}

/** Index just past the `closer` that balances an opener ending right before `i`. */
function skipBalanced(src: string, i: number, closer: string): number {
  const end = scanCode(src, i, '([{', (ch, at) => (ch === closer ? at + 1 : undefined));
  if (end === undefined) throw new SyntaxError('unbalanced brackets');
  return end;
}

const CLOSER: Readonly<Record<string, string>> = { '(': ')', '[': ']', '{': '}' };

/**
 * The one scanning loop: walk the code of `src` from `start`, skipping strings, template
 * literals, comments, and every bracket group opened by a character of `nested` (to its balancing
 * closer). Each other character goes to `visit`; the first value it returns other than undefined
 * ends the walk and is returned. Undefined when `src` ends first.
 */
function scanCode<R>(src: string, start: number, nested: string, visit: (ch: string, i: number) => R | undefined): R | undefined {
  let i = start;
  while (i < src.length) {
    const skipped = skipNonCode(src, i);
    if (skipped !== i) {
      i = skipped;
      continue;
    }
    const ch = src[i]!;
    if (nested.includes(ch)) {
      i = skipBalanced(src, i + 1, CLOSER[ch]!);
      continue;
    }
    const result = visit(ch, i);
    if (result !== undefined) return result;
    i++;
  }
  return undefined;
}

/** If a string, template, comment or regular expression starts at `i`, the index after it; otherwise `i`. */
function skipNonCode(src: string, i: number): number {
  const ch = src[i];
  if (ch === '"' || ch === "'") return skipQuoted(src, i + 1, ch);
  if (ch === '`') return skipTemplate(src, i + 1);
  const after = skipComment(src, i);
  if (after !== i) return after;
  return ch === '/' && startsRegex(src, i) ? skipRegex(src, i) : i;
}

/**
 * Characters after which a `/` begins a regular expression rather than a division: an operator
 * or an opening bracket, as in a default value `sep = /,/` (after a name, a number or a closing
 * bracket it divides: `n = total / 2`), and the keywords an expression follows
 * (`return /\d+/.test(s)`).
 */
const BEFORE_REGEX = new Set('(,=:[!&|?{};+-*%<>~^');
const KEYWORDS_BEFORE_REGEX = new Set(['return', 'typeof', 'case', 'in', 'of', 'yield', 'await', 'void', 'delete', 'instanceof', 'new', 'throw', 'else', 'do']);

function startsRegex(src: string, slash: number): boolean {
  let i = slash - 1;
  while (i >= 0 && /\s/.test(src[i]!)) i--;
  // After a postfix `i++` or `i--`, a `/` divides.
  if (i > 0 && (src[i] === '+' || src[i] === '-') && src[i - 1] === src[i]) return false;
  if (i < 0 || BEFORE_REGEX.has(src[i]!)) return true;
  let start = i;
  while (start > 0 && isIdentifierChar(src[start - 1])) start--;
  return KEYWORDS_BEFORE_REGEX.has(src.slice(start, i + 1));
}

/**
 * If a regular expression starts at the `/` at `slash`, the index after it (past its closing `/`
 * and flags); otherwise `slash`. A guess that finds no closing `/` on the line was wrong (a
 * division after `i++`, say): the `/` is then read as code, as if no guess had been made.
 */
function skipRegex(src: string, slash: number): number {
  const end = regexEnd(src, slash + 1);
  return end < 0 ? slash : end;
}

/** The index after the regular expression whose body starts at `i`, or -1 if it never closes. */
function regexEnd(src: string, i: number): number {
  let inClass = false;
  while (i < src.length) {
    const ch = src[i];
    if (ch === '\\') i += 2;
    else if (ch === '\n') break;
    else if (inClass) {
      if (ch === ']') inClass = false;
      i++;
    } else if (ch === '[') {
      inClass = true;
      i++;
    } else if (ch === '/') {
      i++;
      while (i < src.length && isIdentifierChar(src[i])) i++;
      return i;
    } else i++;
  }
  return -1;
}

function skipComment(src: string, i: number): number {
  if (src[i] !== '/') return i;
  if (src[i + 1] === '/') {
    const end = src.indexOf('\n', i + 2);
    return end < 0 ? src.length : end + 1;
  }
  if (src[i + 1] === '*') {
    const end = src.indexOf('*/', i + 2);
    if (end < 0) throw new SyntaxError('unterminated comment');
    return end + 2;
  }
  return i;
}

function skipQuoted(src: string, i: number, quote: string): number {
  while (i < src.length) {
    const ch = src[i];
    if (ch === '\\') i += 2;
    else if (ch === quote) return i + 1;
    else i++;
  }
  throw new SyntaxError('unterminated string');
}

function skipTemplate(src: string, i: number): number {
  while (i < src.length) {
    const ch = src[i];
    if (ch === '\\') i += 2;
    else if (ch === '`') return i + 1;
    else if (ch === '$' && src[i + 1] === '{') i = skipBalanced(src, i + 2, '}');
    else i++;
  }
  throw new SyntaxError('unterminated template');
}

/**
 * Build the `inputs` object of one call: declared names for declared parameters, the rest
 * parameter as an array, `arg<index>` for destructured parameters and for extra arguments (the
 * next free `arg<n>` when a parameter is declared with that name: `f(arg1)` called with two
 * arguments keeps both). A parameter named `__proto__` is a key like any other.
 */
export function namedInputs(params: readonly ParamSpec[] | null, args: readonly unknown[]): Record<string, unknown> {
  const inputs: Record<string, unknown> = {};
  const reserved = params === null ? undefined : positionalNamesOf(params);
  const positional = (index: number): string => {
    // Without a declared `arg<n>`, `arg<index>` is free: earlier keys are declared names or lower indexes.
    if (reserved === undefined) return `arg${index}`;
    let n = index;
    while (reserved.has(`arg${n}`) || Object.hasOwn(inputs, `arg${n}`)) n++;
    return `arg${n}`;
  };
  let i = 0;
  if (params !== null) {
    for (; i < params.length && i < args.length; i++) {
      const spec = params[i]!;
      const key = spec.name ?? positional(i);
      if (spec.rest) {
        setInput(inputs, key, args.slice(i));
        return inputs;
      }
      setInput(inputs, key, args[i]);
    }
  }
  for (; i < args.length; i++) setInput(inputs, positional(i), args[i]);
  return inputs;
}

/** `inputs[key] = value`, also for `__proto__` (an own key, not the prototype). */
function setInput(inputs: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(inputs, key, { value, enumerable: true, writable: true, configurable: true });
  else inputs[key] = value;
}

const POSITIONAL_NAME = /^arg\d+$/;
/** Per parameter list (each read once per traced function): its declared names that look positional. */
const positionalNames = new WeakMap<readonly ParamSpec[], ReadonlySet<string> | undefined>();

function positionalNamesOf(params: readonly ParamSpec[]): ReadonlySet<string> | undefined {
  if (positionalNames.has(params)) return positionalNames.get(params);
  const names = params.map((spec) => spec.name).filter((name): name is string => name !== null && POSITIONAL_NAME.test(name));
  const reserved = names.length === 0 ? undefined : new Set(names);
  positionalNames.set(params, reserved);
  return reserved;
}
