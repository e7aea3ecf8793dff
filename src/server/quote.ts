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
  return text.length > maxChars ? `${text.slice(0, maxChars)}…` : text;
}
