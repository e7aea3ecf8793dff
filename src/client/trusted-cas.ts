/**
 * TLS trust for the `ca` option. Node's `ca` TLS option replaces its trust store rather than
 * adding to it, so the context trusts Node's default CAs first and the option's certificates
 * after them: a company CA added this way does not stop public services from verifying.
 *
 * The context is built once per transport and handed to every connection (`secureContext`):
 * given `ca` itself, each TLS connection would parse the ~150 root certificates again.
 */
import { readFileSync } from 'node:fs';
import * as tls from 'node:tls';

/** A secure context trusting Node's default CAs and `extra` (PEM certificates). */
export function contextTrusting(extra: readonly string[]): tls.SecureContext {
  return tls.createSecureContext({ ca: [...defaultCas(), ...extra] });
}

type CaLister = (type: 'default') => string[];

function defaultCas(): readonly string[] {
  // Node 22.15+ lists its whole default store: bundled roots, NODE_EXTRA_CA_CERTS, and the system
  // store under --use-openssl-ca / --use-system-ca.
  const list = (tls as { getCACertificates?: CaLister }).getCACertificates;
  if (typeof list === 'function') return list('default');
  // Older Node: its bundled roots and NODE_EXTRA_CA_CERTS (read by Node at start, from the same
  // variable). A system store chosen with --use-openssl-ca is not listed there and is not kept.
  return [...tls.rootCertificates, ...extraCaCertificates()];
}

function extraCaCertificates(): string[] {
  const path = process.env.NODE_EXTRA_CA_CERTS;
  if (path === undefined || path === '') return [];
  try {
    return [readFileSync(path, 'latin1')];
  } catch {
    // Node has already warned about an unreadable file at start-up.
    return [];
  }
}
