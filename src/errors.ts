/**
 * Every error callbridge raises, in one file. Each class carries a stable `code` so callers can
 * branch on it without parsing messages (the model is undici's `lib/core/errors.js`).
 */

/** Base class of callbridge's own errors. `code` is stable across releases. */
export class CallbridgeError extends Error {
  readonly code: string;

  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * A misconfigured option, raised at construction (never later, on the send path).
 * A `TypeError` like p-queue's: the message names the option, the expected range and the value.
 */
export class InvalidOptionError extends TypeError {
  readonly code = 'CALLBRIDGE_INVALID_OPTION';
  readonly option: string;

  constructor(option: string, expected: string, received: unknown) {
    super(`Expected \`${option}\` to be ${expected}, got ${describe(received)}`);
    this.name = 'InvalidOptionError';
    this.option = option;
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  return `${typeof value} ${Object.prototype.toString.call(value)}`;
}
