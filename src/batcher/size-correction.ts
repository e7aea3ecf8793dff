/**
 * How far the size guesses taken at admission (`RecordCodec.estimateBytes`) fall short of the JSON
 * the records become, learned from the records serialised, so that what is admitted is charged
 * about what it will weigh and `maxQueueBytes` holds (SPEC §4.3).
 *
 * The guess counts UTF-16 units, cheaply, on the application's thread. JSON takes more bytes for
 * some text: three for each CJK character, six for a control character (`\u0001`), against the
 * one the guess counts. With such spans the queue held 2.2x (CJK prompts) to 3.3x (control
 * characters) its bound. Measuring each string's UTF-8 size at admission would cost ~220 ns a
 * span on the application's thread; this costs a multiplication.
 *
 * The factor is never below 1: for most spans the guess is already above their JSON (it counts
 * each value twice, as the mapping writes it in `inputs` and in `otel_dump`), and the guess stays
 * what it was for them. It is set once per window of serialised bytes to the ratio of what those
 * records weighed to what they were guessed (the unscaled guesses: records are serialised a batch
 * at a time, long after their admission, so a ratio to what they were charged would feed the
 * factor back on itself), and so falls back to 1 when the spans that needed it stop.
 */

/** Serialised bytes between two updates of the factor: a few dozen spans of CJK text. */
const WINDOW_BYTES = 64 * 1024;

/** The most a guess is scaled by: a span of control characters alone weighs ~6x its guess. */
export const MAX_SIZE_CORRECTION = 8;

/**
 * `charged` scaled by `factor`, rounded up, at most `maxBatchBytes` (a record is cut to fit one
 * batch when serialised, so it never weighs more).
 */
export function scaleCharge(charged: number, factor: number, maxBatchBytes: number): number {
  return factor === 1 ? charged : Math.min(maxBatchBytes, Math.ceil(charged * factor));
}

export class SizeCorrection {
  #factor = 1;
  #guessed = 0;
  #weighed = 0;

  constructor(readonly maxBatchBytes: number) {}

  /** What the guesses are scaled by now: 1 or more. */
  get factor(): number {
    return this.#factor;
  }

  /** A record's admission charge, from its guess (already at most `maxBatchBytes`). */
  charge(guess: number): number {
    return scaleCharge(guess, this.#factor, this.maxBatchBytes);
  }

  /**
   * A record was serialised: its size was guessed `guess` (unscaled) and it weighs `weighed`. A
   * guess of a whole batch (the cap, or a guess that failed) says nothing about the guesses.
   */
  observe(guess: number, weighed: number): void {
    if (guess >= this.maxBatchBytes) return;
    this.#guessed += guess;
    this.#weighed += weighed;
    if (this.#weighed < WINDOW_BYTES) return;
    this.#factor = Math.min(MAX_SIZE_CORRECTION, Math.max(1, this.#weighed / this.#guessed));
    this.#guessed = 0;
    this.#weighed = 0;
  }
}
