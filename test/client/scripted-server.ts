/**
 * Scripted servers on port 0 for the transport tests: a `node:http` server whose handler plays one
 * failure, and a raw `node:net` server for answers node:http will not produce (a 413 written the
 * moment the headers are in, then the socket destroyed under the client's body).
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface ScriptedServer {
  readonly url: string;
  /** Every request whose body was read to the end, in order. */
  readonly received: ReceivedRequest[];
  /** Sockets accepted so far (keep-alive reuses them). */
  connections(): number;
  close(): Promise<void>;
}

/**
 * A node:http server. `handler` gets the request with its body already read unless `readBody` is
 * false (then it gets the request untouched, to answer before the body arrives).
 */
export async function startScriptedServer(
  handler: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void,
  options: { readonly readBody?: boolean } = {},
): Promise<ScriptedServer> {
  const received: ReceivedRequest[] = [];
  let connections = 0;
  const server = http.createServer((req, res) => {
    if (options.readBody === false) {
      handler(req, res, Buffer.alloc(0));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  server.on('connection', () => {
    connections += 1;
  });
  return listen(server, received, () => connections);
}

/** A raw TCP server: `onHead` runs once per connection with the request head, as soon as it is in. */
export async function startRawServer(onHead: (socket: net.Socket, head: string) => void): Promise<ScriptedServer> {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections += 1;
    let head: string | undefined = '';
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      if (head === undefined) return;
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      const complete = head.slice(0, end);
      head = undefined;
      onHead(socket, complete);
    });
  });
  return listen(server, [], () => connections);
}

async function listen(
  server: http.Server | net.Server,
  received: ReceivedRequest[],
  connections: () => number,
): Promise<ScriptedServer> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
