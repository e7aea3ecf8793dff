/**
 * Where the demo sends its calls: the service named by `CALLBRIDGE_BASE_URL` (credentials from
 * `CALLBRIDGE_USERNAME`/`CALLBRIDGE_PASSWORD` or `CALLBRIDGE_API_KEY`, read by callbridge itself),
 * or else the embedded local server on a free port with a throw-away SQLite file.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * @typedef {object} Backend
 * @property {string} description  one line for the output
 * @property {{ baseUrl?: string, username?: string, password?: string }} connection  options for register() and createClient()
 * @property {() => Promise<void>} close  stop what was started for the demo
 */

/** @returns {Promise<Backend>} */
export async function connectBackend(env = process.env) {
  if (env.CALLBRIDGE_BASE_URL) {
    return { description: `service at ${env.CALLBRIDGE_BASE_URL}`, connection: {}, close: async () => {} };
  }
  // Loaded only here: `callbridge` itself never loads the server's SQLite and HTTP framework.
  const { startServer } = await import('callbridge/server');
  const dir = await mkdtemp(join(tmpdir(), 'callbridge-demo-'));
  const password = randomBytes(12).toString('hex');
  try {
    const server = await startServer({
      port: 0,
      dbPath: join(dir, 'demo.db'),
      users: [{ username: 'demo', password, entities: ['*'] }],
    });
    return {
      description: `embedded server at ${server.url} (SQLite in ${dir})`,
      connection: { baseUrl: server.url, username: 'demo', password },
      close: async () => {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
