/**
 * A script run as its own Node process against the built package, for what only a whole process
 * shows (its exit, what it prints). The script imports the package from `CALLBRIDGE_ENTRY` and runs
 * from the repository, so its own imports of `@opentelemetry/*` resolve.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawnNode, type NodeProcess } from './node-process.js';

export const PACKAGE_ENTRY = pathToFileURL(join(import.meta.dirname, '..', '..', 'dist', 'index.js')).href;

export interface ScriptRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run `source` (an ES module, given to `node --input-type=module -e` after `nodeFlags`) with `env`
 * over this process's environment; `CALLBRIDGE_LOG_LEVEL` is cleared so that a developer's own
 * setting cannot change what it prints. Pair with `killSpawned` in `afterEach`.
 */
export async function runPackageScript(source: string, env: Record<string, string> = {}, nodeFlags: string[] = []): Promise<ScriptRun> {
  const child = startPackageScript(source, env, nodeFlags);
  const { code } = await child.exited();
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

/** {@link runPackageScript}'s process, started and not waited for: for a test that talks to it. */
export function startPackageScript(source: string, env: Record<string, string> = {}, nodeFlags: string[] = []): NodeProcess {
  return spawnNode([...nodeFlags, '--input-type=module', '-e', source], { CALLBRIDGE_ENTRY: PACKAGE_ENTRY, CALLBRIDGE_LOG_LEVEL: '', ...env });
}
