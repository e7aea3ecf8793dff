/**
 * TLS trust for the `ca` option: Node's default trust store plus the option's certificates.
 *
 * Node's own `ca` TLS option replaces the default store, so passing it on would stop public
 * services, `NODE_EXTRA_CA_CERTS` and a system store chosen with `--use-openssl-ca` from
 * verifying. Instead the secure context starts from Node's defaults and the certificates are
 * added to it (`addCACert` gives the context its own copy of the default store first). Node 20's
 * copy leaves out the `NODE_EXTRA_CA_CERTS` certificates, so those are added as well (a
 * certificate added twice is kept once).
 *
 * Built once per transport and handed to every connection (`secureContext`): given `ca` itself,
 * each TLS connection would parse the ~150 root certificates again.
 */
import { readFileSync } from 'node:fs';
import * as tls from 'node:tls';
import { certificateBlocks, isTrustedForm } from './pem.js';

// The variable as at load, as Node reads it once at start; its file is read at the first `ca`
// (not at import: most exporters never use the option).
const extraCaPath = process.env.NODE_EXTRA_CA_CERTS;
let extraCaCertificates: string[] | undefined;

interface NativeContext {
  addCACert(pem: string): void;
}

/** A secure context trusting Node's default CAs and `extra` (PEM certificates). */
export function contextTrusting(extra: readonly string[]): tls.SecureContext {
  extraCaCertificates ??= readExtraCaCertificates(extraCaPath);
  const secureContext = tls.createSecureContext();
  const native = (secureContext as { context?: Partial<NativeContext> }).context;
  if (typeof native?.addCACert !== 'function') {
    // A Node without the native context's addCACert: Node's bundled roots, its extra
    // certificates and ours (a system store chosen with --use-openssl-ca is not kept there).
    return tls.createSecureContext({ ca: [...tls.rootCertificates, ...extraCaCertificates, ...extra] });
  }
  for (const pem of [...extraCaCertificates, ...extra]) native.addCACert(pem);
  return secureContext;
}

/** The plain CERTIFICATE blocks of the file, which are what Node takes from it. */
function readExtraCaCertificates(path: string | undefined): string[] {
  if (path === undefined || path === '') return [];
  try {
    return certificateBlocks(readFileSync(path, 'latin1')).filter((block) => !isTrustedForm(block));
  } catch {
    // Node has already warned about an unreadable file at start-up.
    return [];
  }
}
