/**
 * Which captured keys are masked (SPEC §5: "by default keys that look like secrets").
 *
 * The default rule works on the words of a key (split at `_`, `-`, `.`, spaces and camelCase
 * boundaries, lower-cased; an acronym ends before a capitalised word, so `openAIApiKey` is
 * `open ai api key`), so that `max_tokens`, `token_count` and `tokenizer` stay readable while
 * `access_token`, `OPENAI_API_KEY`, `x-api-key` and `HFToken` are masked. A key is a secret when
 * - any word is `password`, `passwd`, `passphrase`, `secret`, `apikey` (each also plural) or
 *   `authorization`; or
 * - two adjacent words are `api key`, `private key` or `access key` (or their plurals), or
 *   `tokens` after `access`, `refresh`, `auth`, `api`, `bearer`, `session` or `id`; or
 * - its last word is `token`, `cookie`, `cookies`, `credential` or `credentials` (not `tokens`
 *   alone, which counts them: `max_tokens`).
 */
import { InvalidOptionError } from '../errors.js';

/** What a masked value is replaced with. */
export const REDACTED = '[REDACTED]';

/**
 * `options.redact`:
 * - `undefined`: the default rule above;
 * - a list of keys: the default rule plus these keys (compared case-insensitively, whole key);
 * - a function `(key, value, path) => replacement`: runs after the default rule on every key the
 *   rule kept; return `value` to keep it. A function that throws masks the value (fail closed);
 * - `false`: nothing is masked.
 */
export type RedactOption =
  | false
  | readonly string[]
  | ((key: string, value: unknown, path: ReadonlyArray<string | number>) => unknown);

/** The compiled form the capture walk consults for every object key. */
export interface Redactor {
  isSecret(key: string): boolean;
  readonly transform: ((key: string, value: unknown, path: ReadonlyArray<string | number>) => unknown) | undefined;
}

const ANYWHERE = new Set(['password', 'passwords', 'passwd', 'passphrase', 'passphrases', 'secret', 'secrets', 'apikey', 'apikeys', 'authorization']);
// `tokens` only after a word that makes them credentials: `max_tokens` and `input_tokens` are counts.
const PAIRS = new Set([
  'api key', 'api keys', 'private key', 'private keys', 'access key', 'access keys',
  'access tokens', 'refresh tokens', 'auth tokens', 'api tokens', 'bearer tokens', 'session tokens', 'id tokens',
]);
const LAST = new Set(['token', 'cookie', 'cookies', 'credential', 'credentials']);

// Keys repeat endlessly (the same parameter and field names on every call), so the word split is
// paid once per distinct key. Bounded so hostile inputs with ever-new keys cannot grow it.
const SECRET_CACHE_LIMIT = 4096;
const secretCache = new Map<string, boolean>();

/**
 * Whether `key` looks like it holds a secret, by the default rule.
 *
 * @example
 * isSecretKey('OPENAI_API_KEY') // true
 * isSecretKey('max_tokens')     // false
 */
export function isSecretKey(key: string): boolean {
  let secret = secretCache.get(key);
  if (secret === undefined) {
    secret = classify(key);
    if (secretCache.size >= SECRET_CACHE_LIMIT) secretCache.clear();
    secretCache.set(key, secret);
  }
  return secret;
}

/**
 * A key is a secret when its words are, split either way at an acronym: `AIApi` is `AI Api`
 * (LangChain JS's `openAIApiKey`, read as `open aiapi key`, was written in clear), while `APIkey`
 * must stay `apikey` (split, it reads `ap ikey`).
 */
function classify(key: string): boolean {
  const camelWords = key.replace(/([a-z0-9])([A-Z])/g, '$1 $2');
  const acronymWords = camelWords.replace(/([A-Z])([A-Z][a-z])/g, '$1 $2');
  return wordsAreSecret(wordsOf(camelWords)) || (acronymWords !== camelWords && wordsAreSecret(wordsOf(acronymWords)));
}

/**
 * Lower-case words, numbers that end the key or a word dropped: `password2`, `token_1` and
 * `apiKey2` name secrets as `password`, `token` and `apiKey` do.
 */
function wordsOf(text: string): string[] {
  const words = text
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .map((word) => word.replace(/([a-z])[0-9]+$/, '$1'))
    .filter((word) => word !== '');
  while (words.length > 1 && /^[0-9]+$/.test(words[words.length - 1]!)) words.pop();
  return words;
}

function wordsAreSecret(words: readonly string[]): boolean {
  const last = words[words.length - 1];
  if (last !== undefined && LAST.has(last)) return true;
  for (let i = 0; i < words.length; i++) {
    if (ANYWHERE.has(words[i]!)) return true;
    if (i > 0 && PAIRS.has(`${words[i - 1]} ${words[i]}`)) return true;
  }
  return false;
}

const NOTHING_SECRET: Redactor = { isSecret: () => false, transform: undefined };
const DEFAULT_REDACTOR: Redactor = { isSecret: isSecretKey, transform: undefined };

/** Compile `options.redact` once, when `trace()` is called. */
export function compileRedactor(option: RedactOption | undefined): Redactor {
  if (option === undefined) return DEFAULT_REDACTOR;
  if (option === false) return NOTHING_SECRET;
  if (typeof option === 'function') return { isSecret: isSecretKey, transform: option };
  if (Array.isArray(option)) {
    const extra = new Set(option.map((key) => String(key).toLowerCase()));
    return { isSecret: (key) => extra.has(key.toLowerCase()) || isSecretKey(key), transform: undefined };
  }
  throw new InvalidOptionError('redact', 'false, a list of keys or a function', option);
}
