/**
 * The soak's fault proxy: a node:http server in front of the local server that injects faults at
 * random, in episodes drawn from a seeded generator: connection resets (mid-body and after the
 * server committed), runs of 503, 429 with Retry-After, answers slower than the client's timeout
 * (after the commit), and short outages during which the port refuses connections.
 *
 * The tests' scripted proxy (test/exporter/fault-proxy.ts) plays fixed scripts; this one plays
 * a random schedule for minutes, so it keeps its own small state machine.
 */
import { createServer } from 'node:http';

/** Mulberry32: a small seeded PRNG, so a soak run can be replayed with `--seed`. */
export function seededRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const EPISODES = ['reset', 'reset-mid-body', 'reset-after-commit', '503-run', '429', 'slow', 'outage'];

/**
 * Start the proxy. `slowMs` must exceed the client's request timeout.
 * @returns {Promise<{ url: string, faults: Record<string, number>, startChaos(): void, stopChaos(): Promise<void>, close(): Promise<void> }>}
 */
export async function startChaosProxy({ upstream, seed, slowMs }) {
  const random = seededRandom(seed);
  const faults = Object.fromEntries(EPISODES.map((name) => [name, 0]));
  const sockets = new Set();
  /** The fault being played: a name and either a number of requests left or an end time. */
  let episode = null;
  let chaos = false;
  let nextEpisodeAt = Infinity;
  let scheduler;

  const forward = async (request, body) => {
    const answer = await fetch(upstream + request.url, {
      method: 'POST',
      headers: { 'content-type': request.headers['content-type'] ?? 'application/json', authorization: request.headers.authorization ?? '' },
      body,
    });
    return { status: answer.status, type: answer.headers.get('content-type') ?? 'application/json', text: await answer.text() };
  };

  const currentFault = () => {
    if (episode === null) return null;
    if (episode.requestsLeft !== undefined) {
      episode.requestsLeft -= 1;
      const name = episode.name;
      if (episode.requestsLeft <= 0) episode = null;
      return name;
    }
    if (Date.now() >= episode.until) {
      episode = null;
      return null;
    }
    return episode.name;
  };

  const handle = async (request, response) => {
    const fault = currentFault();
    if (fault !== null) faults[fault] += 1;
    if (fault === 'reset-mid-body') {
      request.once('data', () => request.socket.destroy());
      return;
    }
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    switch (fault) {
      case 'reset':
        request.socket.destroy();
        return;
      case '503-run':
        response.writeHead(503, { 'content-type': 'application/json' }).end('{"reason":"soak: unavailable"}');
        return;
      case '429':
        response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"reason":"soak: slow down"}');
        return;
      default: {
        const answer = await forward(request, body);
        if (fault === 'reset-after-commit') {
          response.writeHead(answer.status, { 'content-type': answer.type, 'content-length': String(Buffer.byteLength(answer.text) + 16) });
          response.write(answer.text.slice(0, answer.text.length >> 1), () => request.socket.destroy());
          return;
        }
        if (fault === 'slow') await new Promise((resolve) => setTimeout(resolve, slowMs));
        if (request.socket.destroyed) return;
        response.writeHead(answer.status, { 'content-type': answer.type }).end(answer.text);
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
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;

  const stopListening = () =>
    new Promise((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
  const listenAgain = () =>
    new Promise((resolve, reject) => {
      if (server.listening) return resolve();
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });

  /** Every 5-15 s, start one episode at random. */
  const tick = async () => {
    if (!chaos || Date.now() < nextEpisodeAt) return;
    nextEpisodeAt = Date.now() + 5_000 + random() * 10_000;
    const name = EPISODES[Math.floor(random() * EPISODES.length)];
    if (name === 'outage') {
      faults.outage += 1;
      await stopListening();
      await new Promise((resolve) => setTimeout(resolve, 1_000 + random() * 6_000));
      await listenAgain();
    } else if (name === '503-run') {
      episode = { name, until: Date.now() + 500 + random() * 4_000 };
    } else {
      episode = { name, requestsLeft: 1 + Math.floor(random() * 6) };
    }
  };

  return {
    url: `http://127.0.0.1:${port}`,
    faults,
    startChaos() {
      chaos = true;
      nextEpisodeAt = Date.now() + 2_000;
      let running = false;
      scheduler = setInterval(() => {
        if (running) return;
        running = true;
        void tick().finally(() => (running = false));
      }, 100);
    },
    /** Stop injecting and make sure the port listens: what follows is the final, fault-free flush. */
    async stopChaos() {
      chaos = false;
      clearInterval(scheduler);
      episode = null;
      // An outage may be in progress: wait for its tick to reopen the port, then make sure.
      await new Promise((resolve) => setTimeout(resolve, 100));
      while (!server.listening) await new Promise((resolve) => setTimeout(resolve, 100));
    },
    async close() {
      clearInterval(scheduler);
      await stopListening();
    },
  };
}
