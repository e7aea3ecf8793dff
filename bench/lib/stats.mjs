/** Small statistics over repeated measurements. */

/** The q-quantile (0..1) of `values` by nearest rank; NaN for an empty list. */
export function quantile(values, q) {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}

export const median = (values) => quantile(values, 0.5);

/** `{ median, min, max, n }` of the finite numbers in `values`. */
export function summarize(values) {
  const finite = values.filter((v) => typeof v === 'number' && Number.isFinite(v));
  if (finite.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, n: 0 };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), n: finite.length };
}
