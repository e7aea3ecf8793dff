/**
 * The client is reachable from `callbridge`'s main entry, which must not load the server's
 * dependencies or TypeBox (brief: dependency direction). This follows every runtime import from
 * `src/client/index.ts` and fails on one that reaches them; `import type` lines do not load code.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FORBIDDEN_PACKAGES = ['typebox', 'fastify', '@fastify/multipart', 'better-sqlite3'];

function runtimeImports(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const specifiers: string[] = [];
  const statement = /^(import|export)\s+(?!type\s)[^;]*?from\s+'([^']+)'/gms;
  for (const match of source.matchAll(statement)) specifiers.push(match[2] ?? '');
  for (const match of source.matchAll(/^import\s+'([^']+)'/gm)) specifiers.push(match[1] ?? '');
  return specifiers;
}

function reachable(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (files.has(file)) continue;
    files.add(file);
    for (const specifier of runtimeImports(file)) {
      if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else packages.add(specifier);
    }
  }
  return { files, packages };
}

describe('client imports', () => {
  it('loads nothing of the server, the wire schemas or TypeBox at runtime', () => {
    const { files, packages } = reachable(resolve(root, 'src/client/index.ts'));
    const relative = [...files].map((file) => file.slice(root.length + 1));
    expect(relative).toContain('src/client/transport.ts');
    expect(relative.filter((file) => file.startsWith('src/server/') || file.startsWith('src/wire/'))).toEqual([]);
    expect([...packages].filter((name) => FORBIDDEN_PACKAGES.includes(name))).toEqual([]);
    expect(packages).toContain('undici');
  });
});
