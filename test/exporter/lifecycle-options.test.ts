/**
 * Option resolution of the exporter (and so of register()): environment variables as they
 * come from files and secrets, and hostile values.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/errors.js';
import { resolveExporterOptions } from '../../src/options.js';

describe('baseUrl from the environment', () => {
  it.each([
    ['WF_TRACE_SERVER_URL', 'https://trace.wandb.ai/\n'],
    ['CALLBRIDGE_BASE_URL', '  https://trace.wandb.ai  '],
    ['CALLBRIDGE_BASE_URL', 'https://trace.wandb.ai/\r\n'],
  ])('%s=%j resolves to the URL requests use, without the whitespace the URL parser ignores', (name, value) => {
    expect(resolveExporterOptions({ projectId: 'a/b' }, { [name]: value }).baseUrl).toBe('https://trace.wandb.ai');
  });

  it('keeps a path, and still refuses a query hidden behind whitespace', () => {
    expect(resolveExporterOptions({ projectId: 'a/b', baseUrl: 'http://127.0.0.1:6345/api/\n' }, {}).baseUrl).toBe('http://127.0.0.1:6345/api');
    expect(() => resolveExporterOptions({ projectId: 'a/b' }, { CALLBRIDGE_BASE_URL: 'http://x/?key=1\n' })).toThrow(InvalidOptionError);
    expect(() => resolveExporterOptions({ projectId: 'a/b' }, { CALLBRIDGE_BASE_URL: ' \n' })).toThrow(InvalidOptionError);
  });
});

describe('hostile values', () => {
  it.each([
    ['maxBatchItems', NaN],
    ['concurrency', Infinity],
    ['connections', -1],
    ['maxQueueBytes', 1.5],
    ['shutdownTimeoutMs', 2 ** 31],
    ['requestTimeoutMs', 0],
    ['backpressureMs', 1001],
    ['concurrency', '4'],
    ['flushOnExit', 'yes'],
    ['deliveryThread', 'thread'],
    ['logLevel', 'debug'],
  ])('refuses %s: %j with an InvalidOptionError', (option, value) => {
    expect(() => resolveExporterOptions({ projectId: 'a/b', [option]: value } as never, {})).toThrow(InvalidOptionError);
  });
});
