/** Talking to the sink (bench/sink.mjs) from a scenario: read its counters, wait for arrivals. */
import http from 'node:http';

/** GET/POST `url` with a fresh socket (never the exporter's pools) and parse the JSON answer. */
export function requestJson(url, method = 'GET') {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        try {
          resolve(JSON.parse(text));
        } catch (error) {
          reject(error);
        }
      });
    });
    req.on('error', reject);
    req.end();
  });
}

export const sinkStats = (sinkUrl) => requestJson(`${sinkUrl}/stats`);
export const resetSink = (sinkUrl) => requestJson(`${sinkUrl}/reset`, 'POST');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Wait until the sink has counted `expected` spans beyond `baseline`, or until nothing has
 * arrived and nothing is in flight for `quietMs` (what did not arrive by then was lost).
 */
export async function waitForSpans(sinkUrl, expected, { baseline = 0, quietMs = 1500, pollMs = 20 } = {}) {
  let last = await sinkStats(sinkUrl);
  let quietSince = performance.now();
  while (last.spans - baseline < expected) {
    await sleep(pollMs);
    const next = await sinkStats(sinkUrl);
    if (next.spans !== last.spans || next.inflight > 0) quietSince = performance.now();
    else if (performance.now() - quietSince > quietMs) return next;
    last = next;
  }
  return last;
}
