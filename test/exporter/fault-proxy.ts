/**
 * A scripted node:http server on port 0 that stands in front of the real local server and injects
 * faults: statuses (503 runs, 429 + Retry-After, 400 for a poisoned item), connection resets,
 * hangs past the client's timeout, and an early 413 sent on seeing Content-Length alone. Whatever
 * the script lets through is proxied to the real server, so the database tells what was delivered.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface ProxiedRequest {
  readonly index: number;
  readonly path: string;
  readonly body: Buffer;
}

export type FaultAction =
  | { readonly kind: 'proxy' }
  | { readonly kind: 'status'; readonly status: number; readonly body?: unknown; readonly headers?: Record<string, string> }
  | { readonly kind: 'reset' }
  | { readonly kind: 'hang' };

export interface FaultProxyOptions {
  readonly upstream: string;
  /** Decide what to do with each request once its body is read. */
  readonly script: (request: ProxiedRequest) => FaultAction;
  /** Answer 413 from the Content-Length header alone, before reading the body, and close. */
  readonly early413OverBytes?: number;
}

export interface FaultProxy {
  readonly url: string;
  readonly requests: ProxiedRequest[];
  readonly earlyRejections: number;
  close(): Promise<void>;
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const requests: ProxiedRequest[] = [];
  const sockets = new Set<Socket>();
  let earlyRejections = 0;
  let counter = 0;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const length = Number(request.headers['content-length'] ?? 0);
    if (options.early413OverBytes !== undefined && length > options.early413OverBytes) {
      earlyRejections += 1;
      response.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
      response.end(JSON.stringify({ reason: 'Request too large' }), () => request.socket.destroy());
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const proxied: ProxiedRequest = { index: counter++, path: request.url ?? '/', body: Buffer.concat(chunks) };
    requests.push(proxied);
    const action = options.script(proxied);
    switch (action.kind) {
      case 'reset':
        request.socket.destroy();
        return;
      case 'hang':
        return; // the socket is destroyed by close()
      case 'status':
        response.writeHead(action.status, { 'content-type': 'application/json', ...action.headers });
        response.end(JSON.stringify(action.body ?? { reason: `scripted ${action.status}` }));
        return;
      case 'proxy': {
        const upstream = await fetch(options.upstream + proxied.path, {
          method: 'POST',
          headers: {
            'content-type': String(request.headers['content-type'] ?? 'application/json'),
            authorization: String(request.headers.authorization ?? ''),
          },
          body: proxied.body,
        });
        const text = await upstream.text();
        response.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
        response.end(text);
      }
    }
  };

  const server = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(502);
      response.end();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    get earlyRejections() {
      return earlyRejections;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Every call of a project, read back over HTTP through `/calls/stream_query` (jsonl). */
export async function readAllCalls(
  url: string,
  projectId: string,
  credentials: { username: string; password: string },
): Promise<Array<Record<string, any>>> {
  const response = await fetch(`${url}/calls/stream_query`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`,
    },
    body: JSON.stringify({ project_id: projectId }),
  });
  if (response.status !== 200) throw new Error(`stream_query answered ${response.status}: ${await response.text()}`);
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, any>);
}
