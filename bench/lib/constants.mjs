/** Names shared by the bench's processes. */
export const BENCH_PROJECT = 'bench/bench';
export const BENCH_USER = { username: 'dev', password: 'pw' };
