/**
 * Inputs by parameter name, and redaction of captured values: edge cases.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { capture, DEFAULT_MAX_VALUE_BYTES } from '../../src/trace/capture.js';
import { trace } from '../../src/trace/index.js';
import { parseParams } from '../../src/trace/params.js';
import { compileRedactor, isSecretKey, maskUrlSecrets } from '../../src/trace/redact.js';
import { installProvider, jsonAttribute } from './provider.js';

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));
afterAll(() => tracing.provider.shutdown());

const policy = { maxValueBytes: DEFAULT_MAX_VALUE_BYTES, redactor: compileRedactor(undefined) };
const names = (source: string) => parseParams(source)?.map((spec) => spec.name);

describe('inputs', () => {
  it('keeps every argument when a declared parameter is named like a positional one (arg1)', () => {
    const plain = trace(function pick(arg1: string) {
      return arg1;
    } as (...args: string[]) => string);
    plain('first', 'second');
    // Both arguments must be in the inputs: the extra one is named arg1 too, and overwrites.
    expect(Object.values(jsonAttribute(tracing.span('pick'), 'inputs') as object)).toEqual(expect.arrayContaining(['first', 'second']));
  });

  it('keeps a parameter named __proto__', () => {
    // eslint-disable-next-line no-new-func
    const fn = new Function('__proto__', 'return 1') as (x: unknown) => number;
    const traced = trace(fn, { name: 'protoParam' });
    traced({ q: 1 });
    expect(jsonAttribute(tracing.span('protoParam'), 'inputs')).toEqual({ ['__proto__']: { q: 1 } });
  });
});

describe('parameter names', () => {
  it('reads a method named class (an API client: client.class(id))', () => {
    expect(names('class(id, options) { return id; }')).toEqual(['id', 'options']);
  });

  it('reads defaults whose increment is followed by a division', () => {
    expect(names('function f(n = i++ / 2, m = j / 3) {}')).toEqual(['n', 'm']);
  });
});

describe('redaction', () => {
  it('masks numbered secret keys (password2 of a sign-up form, apiKey2, token1)', () => {
    const { value } = capture({ password: 'a', password2: 'b', apiKey2: 'c', token1: 'd', authToken2: 'e', refresh_token_2: 'f', max_tokens_2: 3 }, policy);
    expect(value).toEqual({
      password: '[REDACTED]',
      password2: '[REDACTED]',
      apiKey2: '[REDACTED]',
      token1: '[REDACTED]',
      authToken2: '[REDACTED]',
      refresh_token_2: '[REDACTED]',
      max_tokens_2: 3,
    });
  });

  it("masks header values given as a list of pairs (fetch's HeadersInit), as it does for Headers and Maps", () => {
    const { value } = capture({ headers: [['Authorization', 'Bearer sk-live-123'], ['accept', 'json']] }, policy);
    expect(JSON.stringify(value)).not.toContain('sk-live-123');
  });
});

describe('secrets in URLs', () => {
  const masked = (text: string) => capture(text, policy).value;

  it('masks query and fragment parameters named like secrets, keeping the rest of the URL', () => {
    expect(masked('https://generativelanguage.googleapis.com/v1beta/models/gemini:generateContent?key=AIzaSyA-123&alt=sse')).toBe(
      'https://generativelanguage.googleapis.com/v1beta/models/gemini:generateContent?key=[REDACTED]&alt=sse',
    );
    expect(masked('https://acct.blob.core.windows.net/c/b.txt?sv=2024-01-01&se=2026-12-31&sig=abc%2Bdef%3D')).toBe(
      'https://acct.blob.core.windows.net/c/b.txt?sv=2024-01-01&se=2026-12-31&sig=[REDACTED]',
    );
    expect(masked('https://s3.amazonaws.com/b/k?X-Amz-Credential=AKIA%2F20261206&X-Amz-Security-Token=tok&X-Amz-Signature=f00d&X-Amz-Expires=60')).toBe(
      'https://s3.amazonaws.com/b/k?X-Amz-Credential=[REDACTED]&X-Amz-Security-Token=[REDACTED]&X-Amz-Signature=[REDACTED]&X-Amz-Expires=60',
    );
    // The OAuth implicit flow returns its token in the fragment.
    expect(masked('https://app.example/cb#access_token=ya29.a0&token_type=Bearer&expires_in=3599')).toBe(
      'https://app.example/cb#access_token=[REDACTED]&token_type=Bearer&expires_in=3599',
    );
    // Percent-encoded and mixed-case names are read as decoded.
    expect(masked('https://x.example/?API%5FKEY=1&Client_Secret=2&page=3')).toBe('https://x.example/?API%5FKEY=[REDACTED]&Client_Secret=[REDACTED]&page=3');
  });

  it('masks the password of user info, and URLs inside longer text (a prompt, a log line)', () => {
    expect(masked('postgres://app:s3cr%40t@db.internal:5432/prod')).toBe('postgres://app:[REDACTED]@db.internal:5432/prod');
    expect(masked('redis://:p@ss@cache:6379/0')).toBe('redis://:[REDACTED]@cache:6379/0');
    expect(masked('Fetch "https://api.example.com/v1/data?token=abc123" then summarise it.\nDone: https://ok.example/?q=1')).toBe(
      'Fetch "https://api.example.com/v1/data?token=[REDACTED]" then summarise it.\nDone: https://ok.example/?q=1',
    );
  });

  it('leaves URLs without secrets, ports, counts named like tokens, and text without URLs as they are', () => {
    for (const text of [
      'https://example.com:8443/path?q=moons&page=2#top',
      'https://api.example.com/v1/chat?max_tokens=512&keys=3',
      'no url here: key=value & token=not-a-url',
      'mailto:someone@example.com?subject=key',
      '',
    ]) {
      expect(masked(text)).toBe(text);
    }
  });

  it('reads long text in one pass: a long run of letters before a URL, a URL of many ?, a value holding ?', () => {
    // Each was quadratic with a pattern tried at every position (seconds for these lengths).
    // Longer than capture keeps: the masking itself is what is read here.
    const mask = (text: string) => maskUrlSecrets(text, isSecretKey);
    const letters = 'a'.repeat(300_000);
    expect(mask(`${letters} https://x.example/?key=k1`)).toBe(`${letters} https://x.example/?key=[REDACTED]`);
    const questions = `https://x.example/${'?'.repeat(300_000)}`;
    expect(mask(questions)).toBe(questions);
    expect(masked('https://x.example/?token=ab?cd&next=https://y.example/?q=1')).toBe('https://x.example/?token=[REDACTED]&next=https://y.example/?q=1');
    const many = Array.from({ length: 20_000 }, (_, i) => `http://h${i}.example/?sig=s${i}`).join(' ');
    expect(mask(many)).toBe(Array.from({ length: 20_000 }, (_, i) => `http://h${i}.example/?sig=[REDACTED]`).join(' '));
  });

  it('masks URLs in inputs (the direct path for scalar arguments too), outputs and nested values; not with redact: false', () => {
    const fetchJson = trace(function fetchJson(url: string, options: { retries: number; next: string }) {
      return { url, echoed: [url] };
    });
    const url = 'https://api.example.com/v1/items?api_key=sk-live-9&page=2';
    fetchJson(url, { retries: 1, next: url });
    const scalar = trace(function get(target: string) {
      return target.length;
    });
    scalar(url);
    const shown = `${JSON.stringify(tracing.span('fetchJson').attributes)}${JSON.stringify(tracing.span('get').attributes)}`;
    expect(shown).not.toContain('sk-live-9');
    expect(jsonAttribute(tracing.span('get'), 'inputs')).toEqual({ target: 'https://api.example.com/v1/items?api_key=[REDACTED]&page=2' });

    tracing.reset();
    const raw = trace(function rawGet(target: string) {
      return target;
    }, { redact: false });
    raw(url);
    expect(jsonAttribute(tracing.span('rawGet'), 'inputs')).toEqual({ target: url });
  });
});
