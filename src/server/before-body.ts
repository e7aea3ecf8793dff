/**
 * Checks a request's headers before its body is read (Fastify's `preParsing` hook): a request the
 * server will refuse anyway (an encoding or coding it cannot read) is answered without reading the
 * body first.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * A `preParsing` hook running `check`; when it throws (a 415, say), the connection is closed
 * rather than kept alive with the body half read, as Fastify does when its own body reading fails.
 *
 * @example
 * app.addHook('preParsing', checkBeforeBody((request) => contentCodingOf(request.headers['content-encoding'])));
 */
export function checkBeforeBody(check: (request: FastifyRequest) => void) {
  return async (request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    try {
      check(request);
    } catch (error) {
      void reply.header('connection', 'close');
      throw error;
    }
    return payload;
  };
}
