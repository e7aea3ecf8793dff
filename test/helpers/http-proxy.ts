/**
 * A small HTTP proxy on 127.0.0.1 for the proxy tests: tunnels (`CONNECT host:port`, answered
 * 200 then piped) and forwarded requests (absolute-form `GET http://host/path`), with optional
 * Basic credentials (`Proxy-Authorization`; 407 without them). It records what it was asked.
 */
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo } from 'node:net';

export interface TestProxy {
  readonly url: string;
  /** `CONNECT` targets (`host:port`), in order. */
  readonly tunnels: string[];
  /** Absolute URLs of forwarded requests, in order. */
  readonly forwarded: string[];
  /** `Proxy-Authorization` values received. */
  readonly credentials: Array<string | undefined>;
  /** Sockets opened to the proxy so far. */
  sockets(): number;
  close(): Promise<void>;
}

export async function startTestProxy(options: { username?: string; password?: string } = {}): Promise<TestProxy> {
  const expected =
    options.username === undefined ? undefined : `Basic ${Buffer.from(`${options.username}:${options.password ?? ''}`).toString('base64')}`;
  const tunnels: string[] = [];
  const forwarded: string[] = [];
  const credentials: Array<string | undefined> = [];
  const tunnelSockets = new Set<{ destroy(): void }>();
  const allowed = (request: IncomingMessage): boolean => {
    const given = request.headers['proxy-authorization'];
    credentials.push(given);
    return expected === undefined || given === expected;
  };

  const server = createServer((request, response) => {
    forwarded.push(request.url ?? '');
    if (!allowed(request)) {
      request.resume();
      response.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end();
      return;
    }
    const target = new URL(request.url ?? '');
    const headers = { ...request.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const upstream = httpRequest(
      { host: target.hostname, port: target.port, path: target.pathname + target.search, method: request.method, headers },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    upstream.on('error', () => response.writeHead(502).end());
    request.pipe(upstream);
  });
  server.on('connect', (request: IncomingMessage, socket, head: Buffer) => {
    tunnels.push(request.url ?? '');
    if (!allowed(request)) {
      socket.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\n\r\n');
      return;
    }
    const [host, port] = (request.url ?? '').split(':');
    tunnelSockets.add(socket);
    const upstream = connect(Number(port), host, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(socket).pipe(upstream);
    });
    tunnelSockets.add(upstream);
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  let sockets = 0;
  server.on('connection', () => (sockets += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    sockets: () => sockets,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    tunnels,
    forwarded,
    credentials,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        for (const socket of tunnelSockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
