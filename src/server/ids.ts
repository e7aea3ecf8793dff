/**
 * Ids the server generates: lowercase UUIDv7 (RFC 9562), so ids made by the server sort by
 * creation time like the span ids' calls they sit beside.
 */
import { randomFillSync } from 'node:crypto';

const bytes = new Uint8Array(16);

/**
 * A new lowercase UUIDv7: 48 bits of Unix milliseconds, version 7, variant 10, 74 random bits.
 *
 * @example
 * uuidv7(); // '019a3c4e-7b1d-7c2e-9f00-5e1d2c3b4a59'
 */
export function uuidv7(): string {
  randomFillSync(bytes, 6, 10);
  let millis = Date.now();
  for (let i = 5; i >= 0; i--) {
    bytes[i] = millis % 256;
    millis = Math.floor(millis / 256);
  }
  bytes[6] = 0x70 | ((bytes[6] as number) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] as number) & 0x3f);
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
