/**
 * Spans that end after `shutdown()` are counted as `shutdown` drops; a process that ends
 * soon after (a stop handler: `await tracing.shutdown()`, then exit) must still say so, not only
 * count them in `stats()` behind a report timer that never fires.
 */
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { register } from '../../src/exporter/register.js';

afterEach(() => diag.disable());

function captureWarnings(): string[] {
  const warnings: string[] = [];
  diag.setLogger({ error: () => {}, warn: (message) => warnings.push(message), info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN);
  return warnings;
}

describe('spans ended after shutdown, at the end of the process', () => {
  it.each(['direct main', 'direct worker', 'simple main', 'batch main'])('are reported as dropped when the process ends (%s)', async (setup) => {
    const [spanProcessor, deliveryThread] = setup.split(' ') as ['direct' | 'simple' | 'batch', 'main' | 'worker'];
    // Nothing listens there: nothing is exported before shutdown anyway.
    const tracing = register({ baseUrl: 'http://127.0.0.1:9', projectId: 'acme/lifecycle-late', global: false, spanProcessor, deliveryThread });
    const open = tracing.provider.getTracer('lifecycle test').startSpan('late');
    await tracing.shutdown();
    const warnings = captureWarnings();
    open.end();
    expect(tracing.exporter.stats().dropped.shutdown).toBe(1);
    // What Node does when the loop runs dry (the 'exit' hook reports the same way).
    process.emit('beforeExit', 0);
    expect(warnings.filter((line) => line.includes('dropped spans: shutdown=1'))).toHaveLength(1);
  });
});
