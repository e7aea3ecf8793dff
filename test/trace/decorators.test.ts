/**
 * `@traced()` in both decorator dialects. The fixture is compiled here with the TypeScript
 * compiler (the main tsconfig excludes it, since one file cannot be both dialects): type-checked
 * with `experimentalDecorators` on and off, then transpiled and run against a real provider.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { traced } from '../../src/trace/index.js';
import { installProvider, jsonAttribute } from './provider.js';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'decorators', 'agent.ts');

const tracing = installProvider();
beforeEach(() => tracing.reset());
afterEach(() => expect(tracing.warnings).toEqual([]));

const outDir = await mkdtemp(join(tmpdir(), 'callbridge-decorators-'));
afterAll(async () => {
  await rm(outDir, { recursive: true, force: true });
  await tracing.provider.shutdown();
});

interface AgentInstance {
  readonly model: string;
  plan(goal: string, budget?: number): Promise<string>;
  act(step: number): number;
  steps(count: number): Generator<number>;
}
interface AgentClass {
  new (model: string): AgentInstance;
  create(model: string): AgentInstance;
}

function compilerOptions(experimentalDecorators: boolean): ts.CompilerOptions {
  return {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    experimentalDecorators,
    lib: ['lib.es2023.d.ts'],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
  };
}

async function loadAgent(experimentalDecorators: boolean): Promise<AgentClass> {
  const source = await readFile(FIXTURE, 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, experimentalDecorators },
    fileName: 'agent.ts',
  });
  const file = join(outDir, `agent-${experimentalDecorators ? 'experimental' : 'standard'}.mjs`);
  await writeFile(file, outputText);
  const module = (await import(pathToFileURL(file).href)) as { defineAgent(t: typeof traced): AgentClass };
  return module.defineAgent(traced);
}

for (const experimentalDecorators of [false, true]) {
  describe(`@traced with ${experimentalDecorators ? 'experimentalDecorators' : 'standard (TC39) decorators'}`, () => {
    it('type-checks', () => {
      const program = ts.createProgram([FIXTURE], compilerOptions(experimentalDecorators));
      const problems = ts
        .getPreEmitDiagnostics(program)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(problems).toEqual([]);
    });

    it('traces async methods with this, inputs and output', async () => {
      const Agent = await loadAgent(experimentalDecorators);
      const agent = new Agent('gpt');
      expect(await agent.plan('ship', 5)).toBe('gpt:ship:5');
      const span = tracing.span('plan');
      expect(jsonAttribute(span, 'inputs')).toEqual({ goal: 'ship', budget: 5 });
      expect(span.attributes.output).toBe('gpt:ship:5');
    });

    it('uses options.name and kind, and rethrows the same error', async () => {
      const Agent = await loadAgent(experimentalDecorators);
      const agent = new Agent('m');
      expect(agent.act(2)).toBe(4);
      expect(() => agent.act(-1)).toThrow(RangeError);
      const spans = tracing.spans().filter((span) => span.name === 'Agent.act');
      expect(spans).toHaveLength(2);
      expect(spans[0]?.attributes['weave.span.kind']).toBe('agent');
      expect(spans[1]?.status.message).toBe('negative step');
    });

    it('traces generator and static methods', async () => {
      const Agent = await loadAgent(experimentalDecorators);
      const agent = Agent.create('s');
      expect(agent.model).toBe('s');
      expect([...agent.steps(3)]).toEqual([0, 1, 2]);
      expect(jsonAttribute(tracing.span('create'), 'inputs')).toEqual({ model: 's' });
      expect(jsonAttribute(tracing.span('steps'), 'output')).toEqual([0, 1, 2]);
    });
  });
}

describe('@traced misuse', () => {
  it('throws at definition time on anything but a method, naming the problem', () => {
    const decorate = traced() as unknown as (value: unknown, context: unknown, descriptor?: unknown) => unknown;
    expect(() => decorate(undefined, { kind: 'field', name: 'x' })).toThrow(/`@traced target` to be a method, got a field$/);
    expect(() => decorate(undefined, { kind: 'accessor', name: 'x' })).toThrow(/a method, got an accessor$/);
    expect(() => decorate(undefined, { kind: 'getter', name: 'x' })).toThrow(/a method, got a getter$/);
    expect(() => decorate({}, 'x', { get: () => 1 })).toThrow(/a method, got an accessor$/);
    expect(() => decorate({}, 'x', { value: 1 })).toThrow(/a method, got a property$/);
  });

  it('checks its options when called, before any class uses it', () => {
    expect(() => traced({ captureOutput: 'no' as unknown as boolean })).toThrow(/`captureOutput` to be a boolean, got "no"$/);
    expect(() => traced({ maxValueBytes: 1 })).toThrow(/`maxValueBytes`/);
    expect(() => traced(null as unknown as undefined)).toThrow(/`options` to be an object, got null$/);
    expect(() => traced({ redact: 'password' as never })).toThrow(/`redact`/);
  });
});
