/**
 * Writes `dist/THIRD_PARTY_LICENSES.txt`: the license of every package whose code the build copied
 * into a bundle (the delivery worker carries undici, p-queue and the OpenTelemetry API; the
 * CommonJS build carries p-queue), as their licenses ask of copies. Run by `scripts/build.mjs` after
 * tsup.
 *
 * The packages are read from the bundles themselves: esbuild heads each module it copies with its
 * path (`// node_modules/<package>/...`, or through a symlinked or pnpm `node_modules`), and the
 * package is the one after the path's last `node_modules/`. A copied package without a license
 * file, or bundles that name no package at all, fail the build rather than ship without notices.
 * (`npm run build -- --watch` rebuilds without it; `npm run build` writes it.)
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
/** esbuild's heading of a copied module: its path from where the build ran. */
const COPIED_MODULE = /^\/\/ (\S*node_modules\/\S+)$/gm;
/** The package a path is in: after its last `node_modules/` (nested, pnpm's `.pnpm/...` store). */
const PACKAGE_IN_PATH = /^(.*node_modules\/((?:@[^/]+\/)?[^/]+))\//;
const LICENSE_FILE = /^(licen[cs]e|copying)([.-][\w.-]*)?$/i;

/** Every `.js`/`.cjs` file under `dir`. */
function bundles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return bundles(path);
    return /\.c?js$/.test(entry.name) ? [path] : [];
  });
}

/** Package directory (from the repository root) -> its name and the bundles that carry its code. */
const packages = new Map();
for (const bundle of bundles(dist)) {
  for (const [, path] of readFileSync(bundle, 'utf8').matchAll(COPIED_MODULE)) {
    const found = PACKAGE_IN_PATH.exec(path);
    if (found === null) throw new Error(`${relative(root, bundle)} carries ${path}, whose package cannot be told`);
    const [, dir, name] = found;
    const entry = packages.get(dir) ?? { name, carriers: new Set() };
    entry.carriers.add(relative(dist, bundle));
    packages.set(dir, entry);
  }
}
// The delivery worker always carries its dependencies: none found means esbuild's headings changed.
if (packages.size === 0) throw new Error('no copied package found in dist/: the bundles no longer say which modules they carry');

const sections = [...packages.entries()]
  .sort(([, a], [, b]) => a.name.localeCompare(b.name))
  .map(([dir, { name, carriers }]) => {
    const directory = join(root, dir);
    const manifest = JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8'));
    // `license` is a string today; older manifests have `{ type }` or a `licenses` list of them.
    const licenses = manifest.license !== undefined ? [manifest.license] : (manifest.licenses ?? []);
    const license = licenses.map((entry) => (typeof entry === 'string' ? entry : entry.type)).join(' OR ') || 'no license field';
    const files = readdirSync(directory).filter((file) => LICENSE_FILE.test(file));
    if (files.length === 0) throw new Error(`${name} is copied into ${[...carriers].join(', ')} but has no license file to ship with it`);
    const texts = files.map((file) => readFileSync(join(directory, file), 'utf8').trim());
    return `${name} ${manifest.version} (${license}), in ${[...carriers].sort().join(', ')}\n\n${texts.join('\n\n')}\n`;
  });

const header = 'Third-party code copied into these bundles, and its licenses.\n';
writeFileSync(join(dist, 'THIRD_PARTY_LICENSES.txt'), [header, ...sections].join(`\n${'-'.repeat(78)}\n\n`));
