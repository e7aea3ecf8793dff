/**
 * `file/create` and `file/content` over real sockets, at the edges of multipart forms: repeated
 * parts and fields (read as FastAPI reads them), malformed forms, and the project each is read in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, startTestServer, type TestServer } from '../helpers/server.js';

const DEV = { username: 'dev', password: 'pw' };
const NARROW = { username: 'narrow', password: 'pw2' };

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['acme'] }] });
});
afterAll(async () => server.close());

describe('files', () => {
  const upload = async (parts: Array<[string, string | Uint8Array, string?]>, credentials = DEV) => {
    const form = new FormData();
    for (const [name, value, filename] of parts) {
      if (typeof value === 'string' && filename === undefined) form.append(name, value);
      else form.append(name, new Blob([value as Uint8Array<ArrayBuffer>]), filename ?? 'blob.bin');
    }
    const response = await fetch(`${server.url}/file/create`, { method: 'POST', headers: { authorization: basicAuth(credentials) }, body: form });
    return { status: response.status, body: (await response.json()) as any };
  };
  const rawUpload = async (body: string) => {
    const response = await fetch(`${server.url}/file/create`, {
      method: 'POST',
      headers: { authorization: basicAuth(DEV), 'content-type': 'multipart/form-data; boundary=XX' },
      body,
    });
    return response.status;
  };

  it('refuses two file parts, a project_id sent as a file, and malformed forms with a 400; authorizes every project_id field', async () => {
    expect((await upload([['project_id', 'acme/files'], ['file', new Uint8Array([1]), 'a'], ['file', new Uint8Array([2]), 'b']])).status).toBe(400);
    expect((await upload([['project_id', 'acme/files', 'p.txt'], ['file', new Uint8Array([1])]])).status).toBe(400);
    expect((await upload([['project_id', ''], ['file', new Uint8Array([1])]])).status).toBe(400);
    expect((await upload([['project_id', 'acme/files'], ['project_id', 'other/x'], ['file', new Uint8Array([9])]], NARROW)).status).toBe(403);
    const head = '--XX\r\nContent-Disposition: form-data; name="project_id"\r\n\r\nacme/files\r\n--XX\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nabc';
    expect(await rawUpload(head)).toBe(400);
    expect(await rawUpload(`${head}\r\n`)).toBe(400);
    expect(await rawUpload('garbage')).toBe(400);
  });

  it('stores under the last project_id field, as FastAPI reads a repeated form field, and serves it from that project only', async () => {
    const created = await upload([['project_id', 'acme/files1'], ['project_id', 'acme/files2'], ['file', new Uint8Array([7, 0, 255])]]);
    expect(created.status).toBe(200);
    const content = async (projectId: string) =>
      fetch(`${server.url}/file/content`, {
        method: 'POST',
        headers: { authorization: basicAuth(DEV), 'content-type': 'application/json' },
        body: JSON.stringify({ project_id: projectId, digest: created.body.digest }),
      });
    const found = await content('acme/files2');
    expect(found.status).toBe(200);
    expect(found.headers.get('content-type')).toBe('application/octet-stream');
    expect([...new Uint8Array(await found.arrayBuffer())]).toEqual([7, 0, 255]);
    expect((await content('acme/files1')).status).toBe(404);
  });
});
