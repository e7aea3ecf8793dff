/**
 * PEM certificates for the `ca` option: split out of the text a user gives (a CA bundle, a file
 * that also holds a key) and each one checked, so that a wrong file is refused by name at
 * construction instead of failing every request later with a TLS error. Node's own `ca` accepts
 * `CERTIFICATE` and OpenSSL's `TRUSTED CERTIFICATE` (a certificate followed by trust settings).
 */
import { X509Certificate } from 'node:crypto';

const CERTIFICATE_BLOCK = /-----BEGIN (TRUSTED )?CERTIFICATE-----([^-]*)-----END \1?CERTIFICATE-----/g;
const ANY_BLOCK_LABEL = /-----BEGIN ([A-Z0-9 ]+)-----/g;

/** The certificate blocks of `text`, as they are written there. */
export function certificateBlocks(text: string): string[] {
  return text.match(CERTIFICATE_BLOCK) ?? [];
}

/** Whether a block of {@link certificateBlocks} is OpenSSL's `TRUSTED CERTIFICATE` form. */
export function isTrustedForm(block: string): boolean {
  return block.startsWith('-----BEGIN TRUSTED');
}

/** The labels of every PEM block in `text` (`EC PRIVATE KEY`...), to say what a refused file held. */
export function blockLabels(text: string): string[] {
  return [...text.matchAll(ANY_BLOCK_LABEL)].map((match) => match[1]!);
}

/** Why `block` (from {@link certificateBlocks}) is not a certificate, or undefined when it is one. */
export function certificateProblem(block: string): string | undefined {
  try {
    if (!isTrustedForm(block)) {
      new X509Certificate(block);
      return undefined;
    }
    const der = Buffer.from(block.replace(/-----[^-]+-----/g, ''), 'base64');
    new X509Certificate(der.subarray(0, derElementLength(der)));
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/**
 * Bytes taken by the DER element at the start of `der` (tag, length, content): a trusted
 * certificate is the certificate's element followed by its trust settings.
 */
function derElementLength(der: Uint8Array): number {
  const first = der[1] ?? 0;
  if (first < 0x80) return 2 + first;
  const lengthBytes = first & 0x7f;
  let length = 0;
  for (let i = 0; i < lengthBytes; i++) length = length * 256 + (der[2 + i] ?? 0);
  return 2 + lengthBytes + length;
}
