/**
 * The HTTP layer: the forms of HTTP Basic credentials (SPEC §2.5: 401 with
 * `{"reason": "Unauthorized"}` + `WWW-Authenticate` for missing or wrong credentials).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
let port: number;

beforeAll(async () => {
  server = await startTestServer({
    users: [
      // A password holding U+FFFD, the character a lenient UTF-8 decode puts for any bad byte.
      { username: 'rep', password: 'p\ufffd', entities: ['*'] },
      { username: 'empty', password: '', entities: ['*'] },
      { username: 'colon', password: ':a:b:', entities: ['*'] },
    ],
  });
  port = Number(new URL(server.url).port);
});
afterAll(async () => {
  await server.close();
});

const BODY = JSON.stringify({ project_id: 'acme/demo', id: '00000000000000a1' });

/** POST /call/read with exactly these Authorization header lines (raw, so any bytes can be sent). */
function readWith(authorizationLines: string[]): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (data) => {
      received += data.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      const headEnd = received.indexOf('\r\n\r\n');
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1]),
        head: received.slice(0, headEnd),
        body: received.slice(headEnd + 4),
      });
    });
    socket.on('connect', () => {
      const auth = authorizationLines.map((line) => `Authorization: ${line}\r\n`).join('');
      socket.write(
        `POST /call/read HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${BODY.length}\r\nConnection: close\r\n\r\n${BODY}`,
      );
    });
  });
}

const b64 = (bytes: Buffer | string): string => Buffer.from(bytes).toString('base64');

describe('Basic credentials', () => {
  it('refuses credentials that are not valid UTF-8 rather than matching them as U+FFFD', async () => {
    // "rep:p" + 0xFF: not the password "p\ufffd" (whose UTF-8 is 70 EF BF BD).
    const invalid = b64(Buffer.concat([Buffer.from('rep:p'), Buffer.from([0xff])]));
    const response = await readWith([`Basic ${invalid}`]);
    expect(response.status).toBe(401);
    expect(response.head).toMatch(/www-authenticate: Basic realm="callbridge"/i);
    // The real password still works.
    expect((await readWith([`Basic ${b64('rep:p\ufffd')}`])).status).toBe(200);
  });

  it('does not let two different invalid byte sequences both pass as the same password', async () => {
    const other = b64(Buffer.concat([Buffer.from('rep:p'), Buffer.from([0xc3])]));
    expect((await readWith([`Basic ${other}`])).status).toBe(401);
  });

  it.each([
    ['lower-case scheme', `basic ${b64('dev:pw')}`],
    ['upper-case scheme', `BASIC ${b64('dev:pw')}`],
    ['several spaces', `Basic    ${b64('dev:pw')}`],
    ['trailing spaces', `Basic ${b64('dev:pw')}   `],
    ['empty password of a user that has one', `Basic ${b64('empty:')}`],
    ['colons in the password', `Basic ${b64('colon::a:b:')}`],
  ])('accepts %s', async (_name, line) => {
    const response = await readWith([line]);
    expect(response.status).toBe(200);
  });

  it.each([
    ['empty token', 'Basic '],
    ['scheme only', 'Basic'],
    ['empty user', `Basic ${b64(':pw')}`],
    ['user only, no colon', `Basic ${b64('dev')}`],
    ['password with a trailing newline', `Basic ${b64('dev:pw\n')}`],
    ['NUL appended to the password', `Basic ${b64('dev:pw\u0000')}`],
    ['base64url alphabet', `Basic ${b64('dev:pw??>').replace(/\+/g, '-').replace(/\//g, '_')}`],
    ['token split by a space', `Basic ${b64('dev:pw').slice(0, 4)} ${b64('dev:pw').slice(4)}`],
    ['another scheme', `Digest ${b64('dev:pw')}`],
  ])('answers 401 {"reason":"Unauthorized"} with WWW-Authenticate for %s', async (_name, line) => {
    const response = await readWith([line]);
    expect(response.status).toBe(401);
    expect(JSON.parse(response.body)).toEqual({ reason: 'Unauthorized' });
    expect(response.head).toMatch(/www-authenticate: Basic realm="callbridge"/i);
  });

  it('does not accept a request carrying two different Authorization headers', async () => {
    // RFC 9110 §5.3: Authorization is not a list field; two lines are ambiguous (a proxy in front
    // may check the last while the server takes the first).
    const response = await readWith([`Basic ${b64('dev:pw')}`, `Basic ${b64('mallory:x')}`]);
    expect([400, 401]).toContain(response.status);
  });
});
