/**
 * Answers written from a query's rows as the client reads them (`calls/stream_query`,
 * `calls/query`, `table/query`, `table/query_stream`): the rows are read from an open statement
 * one at a time, turned into text, and pushed a page per turn of the event loop, so an answer far
 * larger than memory is never held whole and other requests' writes run between pages.
 */
import { Readable } from 'node:stream';

/** Most characters pushed per turn of the event loop. */
export const PAGE_CHARS = 256 * 1024;

/** Texts read one at a time from a query's rows. */
export interface TextCursor {
  /** The next row's text, or undefined when none is left (the cursor has then closed itself). */
  next(): string | undefined;
  /** Stop reading (idempotent): frees what the rows hold, such as a read connection. */
  close(): void;
}

/**
 * A cursor over `rows`, each written by `toText`. `release` runs once: when the rows run out, when
 * reading one fails, or on `close()` (which also closes the iterator, so its statement is reset).
 */
export function cursorOf<R>(rows: Iterator<R>, release: () => void, toText: (row: R) => string): TextCursor {
  let open = true;
  const finish = (closeRows: boolean): void => {
    if (!open) return;
    open = false;
    if (closeRows) rows.return?.();
    release();
  };
  return {
    next() {
      if (!open) return undefined;
      let next: IteratorResult<R>;
      try {
        next = rows.next();
      } catch (error) {
        // The iterator has closed itself (both drivers do on an error; store/sqlite.ts).
        finish(false);
        throw error;
      }
      if (next.done === true) {
        finish(false);
        return undefined;
      }
      return toText(next.value);
    },
    close: () => finish(true),
  };
}

/** How the texts are joined into one answer. */
export interface PageShape {
  /** Written before the first text and after the last (`{"rows":[` ... `]}`); none by default. */
  readonly open?: string;
  readonly close?: string;
  /** Written between two texts (`,`); none by default. */
  readonly separator?: string;
  /** Written after each text (JSON lines end in a newline); none by default. */
  readonly end?: string;
  /** Most texts per page, besides PAGE_CHARS: bounds the time one turn spends making them. */
  readonly maxTexts?: number;
}

/**
 * The cursor's texts as one text stream, a page per turn of the event loop as the client takes
 * them. The first text is read now, so an error reading it throws here (and becomes the answer's
 * status); a later one destroys the stream. The cursor is closed when the texts run out or the
 * stream is destroyed (client gone, error).
 *
 * @example
 * reply.type('application/jsonl').send(pagedText(cursorOf(rows, release, (row) => `${JSON.stringify(row)}\n`)));
 */
export function pagedText(cursor: TextCursor, shape: PageShape = {}): Readable {
  const { open = '', close = '', separator = '', end = '', maxTexts = Number.POSITIVE_INFINITY } = shape;
  let text: string | undefined;
  try {
    text = cursor.next();
  } catch (error) {
    cursor.close();
    throw error;
  }
  let page = open;
  let first = true;
  const pushPage = (stream: Readable): void => {
    if (stream.destroyed) return;
    try {
      let count = 0;
      while (text !== undefined && count < maxTexts && page.length < PAGE_CHARS) {
        page += (first ? text : separator + text) + end;
        first = false;
        count += 1;
        text = cursor.next();
      }
      const last = text === undefined;
      if (last) page += close;
      if (page !== '') stream.push(page);
      page = '';
      if (last) stream.push(null);
    } catch (error) {
      stream.destroy(error as Error);
    }
  };
  return new Readable({
    read() {
      setImmediate(pushPage, this);
    },
    destroy(error, callback) {
      cursor.close();
      callback(error);
    },
  });
}
