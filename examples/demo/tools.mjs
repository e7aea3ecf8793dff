/**
 * The two tools the support agent can call, over simulated back-end services. Each is a traced
 * function, so every call (and every failed attempt) is a call in the trace.
 */
import { trace } from 'callbridge';

const ORDERS = new Map([
  ['1042', { id: '1042', item: 'ceramic teapot', total: '$38.00', status: 'delivered' }],
]);

const REFUND_POLICIES = new Map([
  ['damaged', { refund: 'full', days: 5, needsReturn: false }],
  ['late', { refund: 'shipping', days: 3, needsReturn: false }],
]);

/** An error a caller may retry: the service did not answer in time. */
export class ServiceTimeoutError extends Error {
  name = 'ServiceTimeoutError';
  retryable = true;
}

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The order service is flaky in a predictable way: its first request times out. The agent
// retries, so the trace shows a failed attempt followed by a successful one.
let orderServiceRequests = 0;

/** Look an order up by id. */
export const lookupOrder = trace(
  async function lookupOrder(/** @type {string} */ orderId) {
    await sleep(3);
    orderServiceRequests += 1;
    if (orderServiceRequests === 1) throw new ServiceTimeoutError('order service did not answer within 2000 ms');
    const order = ORDERS.get(orderId);
    if (order === undefined) throw new Error(`no order #${orderId}`);
    return order;
  },
  { kind: 'tool' },
);

/** The refund policy for a complaint reason. */
export const checkRefundPolicy = trace(
  async function checkRefundPolicy(/** @type {string} */ reason) {
    await sleep(1);
    return REFUND_POLICIES.get(reason) ?? { refund: 'none', days: 0, needsReturn: true };
  },
  { kind: 'tool' },
);
