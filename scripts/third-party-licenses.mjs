/**
 * Writes `dist/THIRD_PARTY_LICENSES.txt`: the license of every package whose code the build copied
 * into a bundle (the delivery worker carries undici, p-queue and the OpenTelemetry API; the
 * CommonJS build carries p-queue), as their licenses ask of copies. Run by `scripts/build.mjs` after
 * tsup.
 *
 * The packages are read from the bundles themselves: esbuild heads each module it copies with a
 * `// node_modules/<package>/...` comment. A copied package without a license file fails the build
 * rather than shipping without its notice.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
const COPIED_MODULE = /^\/\/ node_modules\/((?:@[^/\n]+\/)?[^/\n]+)\//gm;

/** Every `.js`/`.cjs` file under `dir`. */
function bundles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return bundles(path);
    return /\.c?js$/.test(entry.name) ? [path] : [];
  });
}

/** Package name -> the bundles that carry its code. */
const carriers = new Map();
for (const bundle of bundles(dist)) {
  for (const [, name] of readFileSync(bundle, 'utf8').matchAll(COPIED_MODULE)) {
    const files = carriers.get(name) ?? new Set();
    files.add(relative(dist, bundle));
    carriers.set(name, files);
  }
}

const sections = [...carriers.keys()].sort().map((name) => {
  const dir = join(root, 'node_modules', name);
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const licenseFile = readdirSync(dir).find((file) => /^licen[cs]e(\.(md|txt))?$/i.test(file));
  if (licenseFile === undefined) {
    throw new Error(`${name} is copied into ${[...carriers.get(name)].join(', ')} but has no license file to ship with it`);
  }
  const text = readFileSync(join(dir, licenseFile), 'utf8').trim();
  return `${name} ${manifest.version} (${manifest.license}), in ${[...carriers.get(name)].sort().join(', ')}\n\n${text}\n`;
});

const header = 'Third-party code copied into these bundles, and its licenses.\n';
writeFileSync(join(dist, 'THIRD_PARTY_LICENSES.txt'), [header, ...sections].join(`\n${'-'.repeat(78)}\n\n`));
