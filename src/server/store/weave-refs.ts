/**
 * `weave:///` refs as feedback records carry them (SPEC §2.3): `weave:///<entity>/<project>/<kind>/...`,
 * where an object or op ref names a version as `<name>:<version>` and may go on into the value
 * (`/attr/...`), and a call ref is `call/<id>`.
 */
import { BadRequestError } from '../errors.js';
import { quote } from '../quote.js';

const REF_PREFIX = 'weave:///';

export interface WeaveRef {
  /** `call`, `object`, `op`, or another kind the service may add (kept, not judged here). */
  readonly kind: string;
  /** The parts after the kind: `[<name>:<version>, ...extra]` for objects and ops, `[<id>]` for calls. */
  readonly path: readonly string[];
}

/** An object or op version a ref names. */
export interface VersionRef {
  readonly kind: 'object' | 'op';
  readonly name: string;
  readonly version: string;
  /** Steps into the value after the version (`attr/...`); empty for the version itself. */
  readonly extra: readonly string[];
}

/**
 * Parse `ref` (the request's `field`) and check that it points into `projectId`: feedback on another
 * project's call would leak across the project boundary that authorization draws.
 * @throws BadRequestError naming `field` when the ref is malformed or points elsewhere.
 */
export function parseProjectRef(field: string, ref: string, projectId: string): WeaveRef {
  if (!ref.startsWith(REF_PREFIX)) {
    throw new BadRequestError(`${field} must be a weave:/// ref, got ${quote(ref)}`);
  }
  const [entity, project, kind, ...path] = ref.slice(REF_PREFIX.length).split('/');
  if (!entity || !project || !kind || path.length === 0 || path[0] === '') {
    throw new BadRequestError(`${field} must be weave:///<entity>/<project>/<kind>/<name>, got ${quote(ref)}`);
  }
  if (`${entity}/${project}` !== projectId) {
    throw new BadRequestError(`${field} ${quote(ref)} points outside project ${quote(projectId)}`);
  }
  return { kind, path };
}

/**
 * The object or op version `ref` names, when its kind is one of `kinds`.
 * @throws BadRequestError naming `field` otherwise, or when `<name>:<version>` is malformed.
 */
export function versionRef(field: string, ref: WeaveRef, kinds: ReadonlyArray<'object' | 'op'>): VersionRef {
  const kind = kinds.find((allowed) => allowed === ref.kind);
  if (kind === undefined) {
    const shapes = kinds.map((allowed) => `weave:///<entity>/<project>/${allowed}/<name>:<digest>`).join(' or ');
    throw new BadRequestError(`${field} must be ${shapes}, got a ${quote(ref.kind)} ref`);
  }
  const [nameVersion = '', ...extra] = ref.path;
  const parts = nameVersion.split(':');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
    throw new BadRequestError(`${field} must name a version as <name>:<digest>, got ${quote(nameVersion)}`);
  }
  return { kind, name: parts[0]!, version: parts[1]!, extra };
}

/** @throws BadRequestError naming `field` when `ref` is not of `kind`. */
export function expectRefKind(field: string, ref: WeaveRef, kind: 'call' | 'object'): void {
  if (ref.kind !== kind) {
    const article = kind === 'object' ? 'an' : 'a';
    throw new BadRequestError(`${field} must be ${article} ${kind} ref (weave:///<entity>/<project>/${kind}/...), got a ${quote(ref.kind)} ref`);
  }
}
