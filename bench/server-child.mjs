/**
 * The local server as its own process for scenario f (so its CPU is not the producer's).
 * Usage: node bench/server-child.mjs <dbPath>; prints `{"url", "dbPath"}` once listening and
 * closes cleanly when its stdin ends (the bench is done with it).
 */
import { BENCH_USER } from './lib/constants.mjs';
import { importServer } from './lib/dist.mjs';

const { startServer } = await importServer();

const dbPath = process.argv[2];
const server = await startServer({ port: 0, dbPath, users: [{ ...BENCH_USER, entities: ['*'] }] });
process.stdout.write(`${JSON.stringify({ url: server.url, dbPath })}\n`);

const stop = () => server.close().then(() => process.exit(0));
process.stdin.on('end', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
