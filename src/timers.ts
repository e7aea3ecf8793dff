/**
 * Longest delay a Node timer takes (about 24.8 days): past it Node fires after 1 ms, with a
 * warning, so a huge timeout would behave as none. A module of its own, so that the server and
 * the delivery worker's bundle read it without loading the options' modules.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
