/**
 * The `inputs` attribute of a traced call: JSON text of `{name: argument}` (SPEC §5), compiled
 * once per traced function.
 *
 * Most calls pass strings, numbers and booleans. Their JSON text is written straight from the
 * arguments, with each member's `"name":` prefix and its masking decided once, when the function
 * is first traced; no inputs object is built and no key is checked per call. Measured with the
 * `trace()` benchmark (`add(a, b)`, a provider that discards spans): the inputs cost ~550 ns a
 * call when an inputs object was built and checked key by key, about a quarter of the whole traced
 * call. Anything else (objects, bigints, NaN, a rest parameter that receives arguments, text over
 * `maxValueBytes`, a `redact` function) takes the general way, `capture()` of that object, and
 * both ways give the same text (test/trace/inputs.test.ts compares them).
 */
import { capture, MAX_CAPTURED_ITEMS, utf8Length, type CapturePolicy } from './capture.js';
import { namedInputs, type ParamSpec } from './params.js';
import { maskUrlSecrets, REDACTED } from './redact.js';

/** The JSON text of one call's inputs, from its arguments. Never throws. */
export type InputsText = (args: readonly unknown[]) => string;

/** One member of the inputs object: `"name":`, and whether its value is masked. */
interface Member {
  readonly prefix: string;
  readonly secret: boolean;
}

const REDACTED_JSON = JSON.stringify(REDACTED);
/** Names `namedInputs` gives to destructured and extra arguments: a declared one could collide. */
const POSITIONAL_NAME = /^arg\d+$/;

/** How the calls of a function with parameters `params` (null: unreadable) write their inputs. */
export function compileInputs(params: readonly ParamSpec[] | null, policy: CapturePolicy): InputsText {
  const general: InputsText = (args) => capture(namedInputs(params, args), policy).json;
  const declared = params ?? [];
  const names = declared.map((spec) => spec.name);
  // The direct text must have the keys the object would: each once, in order, none special.
  const distinct = new Set(names).size === names.length;
  const plain = names.every((name) => name === null || (!POSITIONAL_NAME.test(name) && name !== '__proto__'));
  if (policy.redactor.transform !== undefined || !distinct || !plain) return general;
  const members = declared.map((spec, index) => memberOf(spec.name ?? `arg${index}`, policy));
  // A rest parameter collects its arguments into a list: that call takes the general way.
  const restAt = declared.findIndex((spec) => spec.rest);
  const directUpTo = restAt < 0 ? Number.POSITIVE_INFINITY : restAt;
  // capture() keeps the first MAX_CAPTURED_ITEMS members of a record: past that, its way.
  const directArgs = Math.min(directUpTo, MAX_CAPTURED_ITEMS);
  return (args) => (args.length <= directArgs && scalarInputs(args, members, policy)) || general(args);
}

function memberOf(key: string, policy: CapturePolicy): Member {
  return { prefix: `${JSON.stringify(key)}:`, secret: policy.redactor.isSecret(key) };
}

/**
 * The inputs' JSON text when every argument is a string, finite number, boolean, null or
 * undefined (left out, as JSON leaves it) and the text fits `maxValueBytes`; else undefined.
 */
function scalarInputs(args: readonly unknown[], members: readonly Member[], policy: CapturePolicy): string | undefined {
  const max = policy.maxValueBytes;
  let json = '{';
  for (let i = 0; i < args.length; i++) {
    const member = members[i] ?? memberOf(`arg${i}`, policy);
    let text: string;
    if (member.secret) {
      text = REDACTED_JSON;
    } else {
      const value = args[i];
      switch (typeof value) {
        case 'undefined':
          continue;
        case 'string':
          // Checked before writing: a string far over the cap is never copied, only cut by capture().
          if (json.length + value.length + 2 > max) return undefined;
          text = JSON.stringify(policy.redactor.masksUrls ? maskUrlSecrets(value, policy.redactor.isSecret) : value);
          break;
        case 'number':
          // -0 writes as 0, as capture() makes it; NaN and Infinity become text there.
          if (!Number.isFinite(value)) return undefined;
          text = String(value);
          break;
        case 'boolean':
          text = value ? 'true' : 'false';
          break;
        default:
          if (value !== null) return undefined;
          text = 'null';
      }
    }
    json += json.length === 1 ? member.prefix + text : `,${member.prefix}${text}`;
    // Every UTF-16 unit is at least one byte: past the cap already, whatever follows.
    if (json.length > max) return undefined;
  }
  json += '}';
  return utf8Length(json, max) <= max ? json : undefined;
}
