/**
 * The exporter as the delivery tests build and drain it: the real `CallbridgeExporter` pointed at a
 * test server's credentials (directly or through a fault proxy), and the two-step flush.
 */
import { CallbridgeExporter } from '../../src/exporter/index.js';
import type { ExporterOptions } from '../../src/options.js';

/** What an exporter needs from the server it delivers to. */
export interface ExporterTarget {
  readonly username: string;
  readonly password: string;
}

/**
 * An exporter for `projectId` sending to `url` (the server itself or a proxy in front of it) with
 * `target`'s credentials. A 500 ms request timeout keeps hung requests short; `options` win.
 */
export function testExporter(target: ExporterTarget, projectId: string, url: string, options: ExporterOptions = {}): CallbridgeExporter {
  return new CallbridgeExporter({
    baseUrl: url,
    projectId,
    username: target.username,
    password: target.password,
    requestTimeoutMs: 500,
    ...options,
  });
}

/**
 * BatchSpanProcessor.forceFlush hands its spans to export() but does not call the exporter's
 * forceFlush, and our export() answers before delivery: flush both, as register() does.
 */
export async function flushAll(provider: { forceFlush(): Promise<void> }, exporter: CallbridgeExporter): Promise<void> {
  await provider.forceFlush();
  await exporter.forceFlush();
}
