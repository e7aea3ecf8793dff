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
 *
 * Secrets also travel inside text, in URLs: the same rule masks a URL's query and fragment
 * parameters (`?access_token=...`), with names only a URL uses for them (`key`, Google's API keys;
 * `sig` and `...Signature`, signed URLs), and the password of `scheme://user:password@host`
 * ({@link maskUrlSecrets}).
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
  /** Whether URLs in captured text are masked ({@link maskUrlSecrets}); not with `redact: false`. */
  readonly masksUrls: boolean;
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
  const camelWords = splitCamelCase(key);
  const acronymWords = camelWords.replace(/([A-Z])([A-Z][a-z])/g, '$1 $2');
  return wordsAreSecret(wordsOf(camelWords)) || (acronymWords !== camelWords && wordsAreSecret(wordsOf(acronymWords)));
}

/** `apiKey` as `api Key`: a space before each capital that follows a lower-case letter or digit. */
function splitCamelCase(text: string): string {
  return text.replace(/([a-z0-9])([A-Z])/g, '$1 $2');
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

const NOTHING_SECRET: Redactor = { isSecret: () => false, masksUrls: false, transform: undefined };
const DEFAULT_REDACTOR: Redactor = { isSecret: isSecretKey, masksUrls: true, transform: undefined };

/** Compile `options.redact` once, when `trace()` is called. */
export function compileRedactor(option: RedactOption | undefined): Redactor {
  if (option === undefined) return DEFAULT_REDACTOR;
  if (option === false) return NOTHING_SECRET;
  if (typeof option === 'function') return { isSecret: isSecretKey, masksUrls: true, transform: option };
  if (Array.isArray(option)) {
    const extra = new Set(option.map((key) => String(key).toLowerCase()));
    return { isSecret: (key) => extra.has(key.toLowerCase()) || isSecretKey(key), masksUrls: true, transform: undefined };
  }
  throw new InvalidOptionError('redact', 'false, a list of keys or a function', option);
}

/**
 * What names a secret in a URL, though not as an object's key (where `key` is a lookup): a
 * parameter named `key` (Google's API keys), or one whose last word is `sig` or `signature`
 * (signed URLs: Azure's `sig`, S3's `X-Amz-Signature`).
 */
const URL_KEY_NAME = 'key';
const URL_SIGNATURE_WORDS = new Set(['sig', 'signature']);

/** Longest URL scheme looked for before a `://` (`git+ssh`, `chrome-extension`: well under it). */
const MAX_SCHEME_LENGTH = 32;
/** Where a URL in text ends: whitespace, a quote, an angle bracket or a backtick. */
const URL_END = /[\s"'<>`]/g;
const USER_INFO = /^([a-z][a-z0-9+.-]*:\/\/[^/?#@:]*:)([^/?#]+)@/i;
/**
 * `name=value` in a query or fragment: after `?`, `#`, `&` or `;`. No separator inside a name,
 * so each attempt stops at the next one: linear in the URL (a name that could hold `?` made a
 * URL of many `?` quadratic).
 */
const PARAMETER = /([?#&;])([^=&#;?]+)=([^&#;]*)/g;

/**
 * `text` with the secrets of the URLs in it replaced by `[REDACTED]`: the password of
 * `scheme://user:password@host`, and the value of each query or fragment parameter whose name
 * (percent-decoded) `isSecret`, is `key`, or ends in the word `sig` or `signature`. Text without
 * `://` is returned as it is, after one native search: the cost for text that holds no URL.
 * Linear in the text: URLs are found from their `://`, never by a pattern tried at every position
 * (which, before a long run of letters, is quadratic: 2.4 s for 40 000 letters).
 *
 * @example
 * maskUrlSecrets('GET https://api.example.com/v1?key=AIza123&q=moons', isSecretKey);
 * // 'GET https://api.example.com/v1?key=[REDACTED]&q=moons'
 */
export function maskUrlSecrets(text: string, isSecret: (key: string) => boolean): string {
  let separator = text.indexOf('://');
  if (separator < 0) return text;
  let masked = '';
  let copiedTo = 0;
  while (separator >= 0) {
    const start = schemeStart(text, separator);
    URL_END.lastIndex = separator + 3;
    const end = URL_END.test(text) ? URL_END.lastIndex - 1 : text.length;
    if (start < separator) {
      const url = text.slice(start, end);
      const safe = maskUrl(url, isSecret);
      if (safe !== url) {
        masked += text.slice(copiedTo, start) + safe;
        copiedTo = end;
      }
    }
    separator = text.indexOf('://', end);
  }
  return copiedTo === 0 ? text : masked + text.slice(copiedTo);
}

/** Where the scheme before the `://` at `separator` starts (`separator` itself when there is none). */
function schemeStart(text: string, separator: number): number {
  let start = separator;
  while (start > 0 && separator - start < MAX_SCHEME_LENGTH && isSchemeCharacter(text.charCodeAt(start - 1))) start--;
  // A scheme begins with a letter: `1http://` holds `http`.
  while (start < separator && !isLetter(text.charCodeAt(start))) start++;
  return start;
}

function isLetter(code: number): boolean {
  return (code >= 0x61 && code <= 0x7a) || (code >= 0x41 && code <= 0x5a);
}

function isSchemeCharacter(code: number): boolean {
  return isLetter(code) || (code >= 0x30 && code <= 0x39) || code === 0x2b || code === 0x2d || code === 0x2e;
}

function maskUrl(url: string, isSecret: (key: string) => boolean): string {
  return url
    .replace(USER_INFO, `$1${REDACTED}@`)
    .replace(PARAMETER, (parameter, separator: string, name: string) =>
      isUrlSecret(name, isSecret) ? `${separator}${name}=${REDACTED}` : parameter,
    );
}

function isUrlSecret(name: string, isSecret: (key: string) => boolean): boolean {
  let decoded = name;
  try {
    decoded = decodeURIComponent(name.replaceAll('+', ' '));
  } catch {
    // Malformed percent-escapes: the name as written.
  }
  if (decoded.toLowerCase() === URL_KEY_NAME || isSecret(decoded)) return true;
  const words = wordsOf(splitCamelCase(decoded));
  return URL_SIGNATURE_WORDS.has(words[words.length - 1] ?? '');
}
