/**
 * Which span attributes fill which call fields, in priority order (SPEC §3). The first key with a
 * non-empty value wins. These orders are the hosted service's: changing one changes which value a
 * call shows when a span carries several conventions at once.
 */
import { attributePath, type AttributePath } from './unflatten.js';

function paths(keys: readonly string[]): readonly AttributePath[] {
  return keys.map(attributePath);
}

/** Sources of `inputs` (`input`/`inputs` holding an object become `inputs` themselves). */
export const INPUT_PATHS = paths([
  'ai.prompt', // Vercel AI SDK
  'gen_ai.prompt', // GenAI semantic conventions (older)
  'input.value', // OpenInference
  'mlflow.spanInputs',
  'gen_ai.input.messages', // GenAI semantic conventions; Logfire
  'pydantic_ai.all_messages',
  'traceloop.entity.input',
  'gcp.vertex.agent.tool_call_args',
  'gcp.vertex.agent.llm_request',
  'input',
  'inputs',
]);

/** Sources of `output` (`output`/`outputs` alone: their value is the output). */
export const OUTPUT_PATHS = paths([
  'ai.response', // Vercel AI SDK
  'gen_ai.completion', // GenAI semantic conventions (older)
  'output.value', // OpenInference
  'gen_ai.output.messages',
  'mlflow.spanOutputs',
  'final_result', // Pydantic AI agent run
  'gen_ai.content.completion', // OpenLIT
  'traceloop.entity.output',
  'gcp.vertex.agent.tool_response',
  'gcp.vertex.agent.llm_response',
  'output',
  'outputs',
]);

/** Keys that pass an input or output value through unwrapped. */
export const BARE_INPUT_KEYS: ReadonlySet<string> = new Set(['input', 'inputs']);
export const BARE_OUTPUT_KEYS: ReadonlySet<string> = new Set(['output', 'outputs']);

/** `attributes.<name>` and its sources (written in this order). */
export const ATTRIBUTE_PATHS = {
  system: paths(['gen_ai.system', 'llm.system']),
  kind: paths(['weave.span.kind', 'traceloop.span.kind', 'openinference.span.kind']),
  model: paths(['gen_ai.response.model', 'gen_ai.request.model', 'llm.model_name', 'ai.model.id']),
  provider: paths(['llm.provider', 'ai.model.provider', 'gen_ai.provider.name']),
  model_parameters: paths(['gen_ai.request', 'llm.invocation_parameters']),
  agent: paths(['gen_ai.agent.name']),
  tools: paths(['gen_ai.agent.tools']),
  operation: paths(['gen_ai.operation.name']),
} as const;

/** `summary.usage.<model>.<name>` and its sources (written in this order). */
export const USAGE_PATHS = {
  input_tokens: paths(['gen_ai.usage.input_tokens', 'ai.usage.inputTokens']),
  output_tokens: paths(['gen_ai.usage.output_tokens', 'ai.usage.outputTokens']),
  prompt_tokens: paths(['gen_ai.usage.prompt_tokens', 'llm.token_count.prompt', 'ai.usage.promptTokens']),
  completion_tokens: paths(['gen_ai.usage.completion_tokens', 'llm.token_count.completion', 'ai.usage.completionTokens']),
  total_tokens: paths(['llm.usage.total_tokens', 'llm.token_count.total']),
} as const;

/** W&B-specific attributes (set by callbridge's trace wrapper or by hand). */
export const WANDB_PATHS = {
  displayName: attributePath('wandb.display_name'),
  threadId: paths(['wandb.thread_id', 'gen_ai.conversation.id', 'session.id']),
  isTurn: attributePath('wandb.is_turn'),
  attributes: attributePath('wandb.attributes'),
  runId: attributePath('wandb.wb_run_id'),
  runStep: attributePath('wandb.wb_run_step'),
  runStepEnd: attributePath('wandb.wb_run_step_end'),
} as const;
