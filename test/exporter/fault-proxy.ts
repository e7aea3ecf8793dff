/**
 * A scripted node:http server on port 0 that stands in front of the real local server and injects
 * faults: statuses (503 runs, 429 + Retry-After, 400 for a poisoned item), connection resets,
 * hangs past the client's timeout, and an early 413 sent on seeing Content-Length alone. Whatever
 * the script lets through is proxied to the real server, so the database tells what was delivered.
 *
 * Faults after the commit (`slow`, `reset-after-commit`) let the real server store the batch and
 * then deny the client its answer: the retry that follows must rewrite, never duplicate.
 * `stopListening()`/`listenAgain()` make the port refuse connections for a while (an outage).
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
  | { readonly kind: 'hang' }
  /** Proxy (the server commits), then answer only after `delayMs`: a response slower than the client's timeout. */
  | { readonly kind: 'slow'; readonly delayMs: number }
  /** Proxy (the server commits), send the status line and half the answer, then reset the socket. */
  | { readonly kind: 'reset-after-commit' };

export interface FaultProxyOptions {
  readonly upstream: string;
  /** Decide what to do with each request once its body is read. */
  readonly script: (request: ProxiedRequest) => FaultAction;
  /** Answer 413 from the Content-Length header alone, before reading the body, and close. */
  readonly early413OverBytes?: number;
  /** Called before a request's body is read; true resets the socket once the first body chunk arrives. */
  readonly resetMidBody?: (path: string) => boolean;
}

export interface FaultProxy {
  readonly url: string;
  readonly requests: ProxiedRequest[];
  readonly earlyRejections: number;
  /** Requests reset while their body was arriving (`resetMidBody`). */
  readonly midBodyResets: number;
  /** Stop listening and drop every open socket: connections to the port are refused. */
  stopListening(): Promise<void>;
  /** Listen again on the same port after `stopListening()`. */
  listenAgain(): Promise<void>;
  close(): Promise<void>;
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const requests: ProxiedRequest[] = [];
  const sockets = new Set<Socket>();
  let earlyRejections = 0;
  let midBodyResets = 0;
  let counter = 0;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const length = Number(request.headers['content-length'] ?? 0);
    if (options.early413OverBytes !== undefined && length > options.early413OverBytes) {
      earlyRejections += 1;
      response.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
      response.end(JSON.stringify({ reason: 'Request too large' }), () => request.socket.destroy());
      return;
    }
    if (options.resetMidBody?.(request.url ?? '/') === true) {
      midBodyResets += 1;
      request.once('data', () => request.socket.destroy());
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
      case 'proxy':
      case 'slow':
      case 'reset-after-commit': {
        const upstream = await fetch(options.upstream + proxied.path, {
          method: 'POST',
          headers: {
            'content-type': String(request.headers['content-type'] ?? 'application/json'),
            authorization: String(request.headers.authorization ?? ''),
          },
          body: proxied.body,
        });
        const text = await upstream.text();
        const headers = { 'content-type': upstream.headers.get('content-type') ?? 'application/json' };
        if (action.kind === 'reset-after-commit') {
          response.writeHead(upstream.status, { ...headers, 'content-length': String(Buffer.byteLength(text) + 16) });
          response.write(text.slice(0, Math.floor(text.length / 2)), () => request.socket.destroy());
          return;
        }
        if (action.kind === 'slow') await new Promise((resolve) => setTimeout(resolve, action.delayMs));
        if (request.socket.destroyed) return; // the client gave up waiting
        response.writeHead(upstream.status, headers);
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
  const port = address.port;
  const stopListening = async (): Promise<void> => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get earlyRejections() {
      return earlyRejections;
    },
    get midBodyResets() {
      return midBodyResets;
    },
    stopListening,
    async listenAgain() {
      if (server.listening) return;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      });
    },
    close: stopListening,
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
