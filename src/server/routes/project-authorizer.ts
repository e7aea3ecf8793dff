import type { FastifyRequest } from 'fastify';
import type { ServerContext } from '../context.js';

/**
 * `ctx.authorizeProject` memoised per project for one request: a batch usually names the same
 * project a thousand times, and each distinct project is checked (and may throw 400/403) once.
 */
export function projectAuthorizer(ctx: ServerContext, request: FastifyRequest): (projectId: string) => string {
  const granted = new Map<string, string>();
  return (projectId) => {
    let username = granted.get(projectId);
    if (username === undefined) {
      username = ctx.authorizeProject(request, projectId);
      granted.set(projectId, username);
    }
    return username;
  };
}
