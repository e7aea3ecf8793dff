/**
 * Quote a client-sent value for an error reason: JSON-quoted and cut to a readable length, so a
 * hostile 30 MiB string never comes back in a 400 body.
 */
export function quote(value: unknown, maxChars = 80): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return clip(text, maxChars);
}

/**
 * Cut client-sent text to a readable length, unquoted, for reasons whose wording shows it as sent
 * (`Unknown field: inputs.x`, as the hosted service words it).
 *
 * @example
 * clip('x'.repeat(100), 3); // 'xxx…'
 */
export function clip(text: string, maxChars = 80): string {
  return text.length > maxChars ? `${text.slice(0, maxChars)}…` : text;
}
