/**
 * TLS in front of a plain-HTTP server, for the `ca` and proxy tests: `127.0.0.1:<port 0>` with a
 * certificate for 127.0.0.1/localhost signed by the test CA of `test/fixtures/tls` (`make.sh`
 * regenerates them), each connection piped to the server at `target`.
 */
import { readFileSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';

export const TLS_FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'tls');

/** The text of a file of `test/fixtures/tls`. */
export function tlsFixture(name: string): string {
  return readFileSync(join(TLS_FIXTURES, name), 'utf8');
}

export interface TlsFront {
  readonly url: string;
  close(): Promise<void>;
}

export async function startTlsFront(target: string): Promise<TlsFront> {
  const port = Number(new URL(target).port);
  const server = createTlsServer({ key: tlsFixture('server-key.pem'), cert: tlsFixture('server-cert.pem') }, (socket) => {
    const upstream = connect(port, '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
