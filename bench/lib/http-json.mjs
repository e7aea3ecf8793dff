/** A keep-alive JSON client for latency measurements against the local server. */
import http from 'node:http';

/** `post(path, body)` -> `{ status, body, ms }`; one socket, sequential requests. */
export function createJsonClient(baseUrl, { username, password }) {
  const url = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  const post = (path, body) =>
    new Promise((resolve, reject) => {
      const payload = JSON.stringify(body);
      const t0 = performance.now();
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), authorization },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => {
            const ms = performance.now() - t0;
            let parsed;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = text;
            }
            resolve({ status: res.statusCode, body: parsed, ms });
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  return { post, close: () => agent.destroy() };
}
