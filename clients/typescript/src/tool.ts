// Guarded tools for LLM tool-calling loops: a repeated tool call is
// replayed, refused or escalated instead of being done again. The model is
// told what happened in the same words as the Go package ledger/tool, and
// the tool definitions and result messages come in the shapes of the
// OpenAI (Chat Completions and Responses), Anthropic and MCP SDKs, as plain
// objects, so no SDK is a dependency.

import { LedgerError } from './errors.js';
import type { CheckResult, ConflictMode, EffectContext, Result } from './types.js';
import type { Json } from './canonical.js';

/** What a guarded tool needs of a run: the client's Run has both. */
export interface ToolRun {
  once(intent: string, payload: unknown, effect: (ctx: EffectContext) => unknown, options?: { summary?: string; conflict?: ConflictMode; waitMs?: number; pendingTtlMs?: number }): Promise<Result>;
  check(intent: string, payload: unknown): Promise<CheckResult>;
}

/** What a tool call came to, as the model is told. */
export type ToolStatus =
  | 'executed'
  | 'replayed'
  | 'in_flight'
  | 'failed'
  | 'ambiguous'
  | 'conversation_changed'
  | 'superseded'
  | 'run_cancelled'
  | 'run_ended'
  | 'busy'
  | 'exhausted'
  | 'rate_limited'
  | 'invalid_arguments'
  | 'unknown_tool'
  | 'unknown_run'
  | 'no_run'
  | 'done'
  | 'not_done'
  | (string & {});

/** One write that changed the scope under the run. */
export interface ToolConflict {
  intent: string;
  state: string;
  summary?: string;
}

/** The model-facing answer of one tool call. */
export interface ToolOutcome {
  status: ToolStatus;
  /** What the model should understand and do next. */
  message: string;
  /** What goes back to the model: JSON with status, message, and result or conflicts when there are any. */
  text: string;
  /** The action was not done by this call. */
  isError: boolean;
  /** The loop must stop: this run may not act any more, or a person has to decide. */
  terminal: boolean;
  /** Calling again (after the message's advice) may make progress. */
  retryable: boolean;
  /** A person must look. */
  escalate: boolean;
  /** The effect's stored result (executed, replayed, done). */
  value?: Json;
  conflicts?: ToolConflict[];
}

function finish(o: Omit<ToolOutcome, 'text'>): ToolOutcome {
  const body: Record<string, unknown> = { status: o.status, message: o.message };
  if (o.value !== undefined && o.value !== null) body.result = o.value;
  if (o.conflicts && o.conflicts.length > 0) body.conflicts = o.conflicts;
  return { ...o, text: JSON.stringify(body) };
}

const base = { isError: false, terminal: false, retryable: false, escalate: false };

function errorText(e?: string): string {
  return e ? ` (${e})` : '';
}

/** toolOutcome maps a ledger result to what the model is told. */
export function toolOutcome(r: Result): ToolOutcome {
  const v = { value: r.value };
  switch (r.status) {
    case 'executed':
      return finish({ ...base, ...v, status: 'executed', message: 'Done.' });
    case 'replayed':
      return finish({ ...base, ...v, status: 'replayed', message: 'Already done earlier; this call did nothing. Do not tell the customer again and do not repeat it.' });
    case 'in_flight':
      return finish({ ...base, ...v, status: 'in_flight', isError: true, retryable: true, message: 'The same action is being done right now by another attempt, and this call did nothing. Wait a moment, then call again with the same arguments (it will not be done twice) or use check_already_done to see how it ended.' });
    case 'failed':
      return finish({ ...base, ...v, status: 'failed', isError: true, retryable: true, message: `It failed and certainly did not happen${errorText(r.error)}. It is safe to try again.` });
    case 'ambiguous':
      return finish({ ...base, ...v, status: 'ambiguous', isError: true, terminal: true, escalate: true, message: `It may or may not have happened${errorText(r.error)}. Do not repeat it; a person will check. Stop here.` });
    case 'refused':
      return refused(r);
  }
  return finish({ ...base, ...v, status: r.status, isError: true, terminal: true, escalate: true, message: `The ledger answered ${r.status}, which this tool does not know; nothing is assumed done. Stop here.` });
}

function refused(r: Result): ToolOutcome {
  const o = { ...base, status: r.reason ?? 'refused', isError: true };
  switch (r.reason) {
    case 'conversation_changed':
      return finish({
        ...o,
        retryable: true,
        message: 'Not done: the conversation changed since you read it (see conflicts). Re-read it, then decide again; call again only if it is still needed.',
        conflicts: (r.conflicts ?? []).map((e) => (e.summary ? { intent: e.intent, state: e.state, summary: e.summary } : { intent: e.intent, state: e.state })),
      });
    case 'busy':
      return finish({ ...o, retryable: true, message: 'Not done: another run holds this conversation right now. Try again later.' });
    case 'superseded':
      return finish({ ...o, terminal: true, message: 'Not done: a newer run now handles this conversation. Stop; say nothing more.' });
    case 'run_cancelled':
      return finish({ ...o, terminal: true, message: 'Not done: this run was cancelled. Stop; say nothing more.' });
    case 'run_ended':
      return finish({ ...o, terminal: true, message: 'Not done: this run has already ended. Stop; say nothing more.' });
    case 'exhausted':
      return finish({ ...o, terminal: true, escalate: true, message: 'Not done: it failed too many times. Do not try again; a person will take over. Stop here.' });
    case 'rate_limited':
      return finish({ ...o, terminal: true, escalate: true, message: 'Not done: this conversation reached its limit for this action, which looks like a loop. A person will take over. Stop here.' });
  }
  return finish({ ...o, terminal: true, escalate: true, message: `Not done: refused (${r.reason}). Stop here; a person will look.` });
}

function invalidArguments(message: string): ToolOutcome {
  return finish({ ...base, status: 'invalid_arguments', isError: true, retryable: true, message: `${message}. Nothing was done; fix the arguments and call again.` });
}

function noRun(name: string): ToolOutcome {
  return finish({ ...base, status: 'no_run', isError: true, terminal: true, escalate: true, message: `Tool ${name} cannot act: it was called outside a ledger run, so nothing was done. Stop here.` });
}

/** The ledger's input errors become outcomes; an outage is rethrown. */
function ledgerRefusedInput(err: unknown): ToolOutcome {
  if (err instanceof LedgerError && err.code === 'unknown_run') {
    return finish({ ...base, status: 'unknown_run', isError: true, terminal: true, escalate: true, message: 'The ledger does not know this run, so nothing was done. Stop and hand over to a person.' });
  }
  if (err instanceof LedgerError && (err.code === 'invalid_request' || err.code === 'body_too_large' || err.code === 'unsupported_media_type')) {
    return finish({ ...base, status: 'invalid_arguments', isError: true, message: `The ledger refused this call as invalid (${err.message}); nothing was done.` });
  }
  throw err;
}

/** A JSON Schema for a tool's arguments: an object schema. */
export type JsonSchema = { type?: 'object'; properties?: Record<string, unknown>; required?: string[]; [k: string]: unknown };

export interface ToolDefinition {
  name: string;
  description: string;
  /** The arguments' JSON Schema (default: an object with no declared properties). */
  parameters: JsonSchema;
  /** The effect's name in the ledger (default name). Tools that do the same thing under other names should share it. */
  intent: string;
}

/** A tool the model may call: a guarded one, or the read-only check_already_done. */
export interface Tool {
  readonly definition: ToolDefinition;
  readonly readOnly: boolean;
  /**
   * call performs one call under run. args is the model's arguments, as a
   * JSON string (OpenAI) or an object (Anthropic, MCP). It rejects only
   * when the ledger could not be asked (an outage); every answer of the
   * ledger, and every mistake of the model, is an outcome.
   */
  call(run: ToolRun | undefined, args: unknown): Promise<ToolOutcome>;
  /** @internal the identity of a call's arguments, for check_already_done. */
  identityOf(args: unknown): unknown;
}

export interface GuardToolOptions<A> {
  name: string;
  description: string;
  parameters?: JsonSchema;
  intent?: string;
  /**
   * The fields of the arguments that make two calls the same action (the
   * order refunded, the message answered). Never the model's wording or its
   * tool-call id: both change on a retry. Throw to refuse the arguments.
   */
  identity: (args: A) => unknown;
  /** Performs the action; its value is stored and replayed. Throw NotApplied when it certainly did not happen. */
  execute: (args: A, ctx: EffectContext) => unknown;
  /** Describes the effect to other runs that conflict with it. */
  summary?: (args: A) => string;
  conflict?: ConflictMode;
  waitMs?: number;
  pendingTtlMs?: number;
}

const namePattern = /^[A-Za-z0-9_-]{1,64}$/;

function definition(name: string, description: string, parameters: JsonSchema | undefined, intent: string | undefined): ToolDefinition {
  if (!namePattern.test(name)) throw new TypeError(`tool: name ${JSON.stringify(name)} must be 1 to 64 letters, digits, '_' or '-'`);
  const p = parameters ?? { type: 'object', properties: {} };
  if (typeof p !== 'object' || p === null || Array.isArray(p) || (p.type !== undefined && p.type !== 'object')) {
    throw new TypeError(`tool ${name}: parameters must be an object schema`);
  }
  return { name, description, parameters: p, intent: intent || name };
}

function parseArgs(name: string, args: unknown): Record<string, unknown> {
  if (args === undefined || args === null || args === '') return {};
  if (typeof args === 'string') {
    let v: unknown;
    try {
      v = JSON.parse(args);
    } catch (err) {
      throw new TypeError(`arguments are not valid for ${name}: ${(err as Error).message}`);
    }
    return parseArgs(name, v);
  }
  if (typeof args !== 'object' || Array.isArray(args)) throw new TypeError(`arguments are not valid for ${name}: not a JSON object`);
  return args as Record<string, unknown>;
}

/** guardTool makes a side-effecting tool that runs at most once per identity within the run's scope. */
export function guardTool<A = Record<string, unknown>>(o: GuardToolOptions<A>): Tool {
  const def = definition(o.name, o.description, o.parameters, o.intent);
  const decode = (raw: unknown): { args: A; id: unknown } => {
    const args = parseArgs(def.name, raw) as A;
    let id: unknown;
    try {
      id = o.identity(args);
    } catch (err) {
      throw new TypeError(`arguments are not valid for ${def.name}: ${(err as Error).message}`);
    }
    return { args, id };
  };
  return {
    definition: def,
    readOnly: false,
    identityOf: (raw) => decode(raw).id,
    async call(run, raw) {
      if (!run) return noRun(def.name);
      let d: { args: A; id: unknown };
      try {
        d = decode(raw);
      } catch (err) {
        return invalidArguments((err as Error).message);
      }
      let res: Result;
      try {
        res = await run.once(def.intent, d.id, (ctx) => o.execute(d.args, ctx), {
          summary: o.summary?.(d.args),
          conflict: o.conflict,
          waitMs: o.waitMs,
          pendingTtlMs: o.pendingTtlMs,
        });
      } catch (err) {
        return ledgerRefusedInput(err);
      }
      return toolOutcome(res);
    },
  };
}

export const checkToolName = 'check_already_done';

/** checkTool makes check_already_done: a read-only tool telling the model whether one of tools was already done for the same identity. */
export function checkTool(...tools: Tool[]): Tool {
  const byName = new Map<string, Tool>();
  for (const t of tools) {
    if (t.readOnly) continue;
    if (byName.has(t.definition.name)) throw new TypeError(`tool: ${t.definition.name} is given twice`);
    byName.set(t.definition.name, t);
  }
  const names = [...byName.keys()];
  if (names.length === 0) throw new TypeError(`tool: ${checkToolName} needs at least one guarded tool`);
  const def = definition(
    checkToolName,
    'Look up, without doing anything, whether an action was already done in this conversation. Call it before repeating an action you may have done.',
    {
      type: 'object',
      properties: {
        tool: { type: 'string', enum: names, description: 'the tool whose action to look up' },
        arguments: { type: 'object', description: 'the arguments you would call it with' },
      },
      required: ['tool', 'arguments'],
      additionalProperties: false,
    },
    checkToolName,
  );
  return {
    definition: def,
    readOnly: true,
    identityOf: () => undefined,
    async call(run, raw) {
      if (!run) return noRun(def.name);
      let target: Tool | undefined;
      let id: unknown;
      try {
        const a = parseArgs(def.name, raw) as { tool?: unknown; arguments?: unknown };
        target = typeof a.tool === 'string' ? byName.get(a.tool) : undefined;
        if (!target) return invalidArguments(`${checkToolName}: tool ${JSON.stringify(a.tool)} is not one of ${JSON.stringify(names)}`);
        id = target.identityOf(a.arguments);
      } catch (err) {
        return invalidArguments((err as Error).message);
      }
      let res: CheckResult;
      try {
        res = await run.check(target.definition.intent, id);
      } catch (err) {
        return ledgerRefusedInput(err);
      }
      return fromCheck(res);
    },
  };
}

function fromCheck(r: CheckResult): ToolOutcome {
  const v = { value: r.entry?.value };
  if (r.done) return finish({ ...base, ...v, status: 'done', message: 'Already done. Do not do it again and do not tell the customer again.' });
  switch (r.status) {
    case 'in_flight':
      return finish({ ...base, ...v, status: 'in_flight', message: 'Being done right now by another attempt. Do not start it again.' });
    case 'ambiguous':
      return finish({ ...base, ...v, status: 'ambiguous', message: 'It may or may not have happened; a person has to check. Do not do it again.' });
    case 'failed':
      return finish({ ...base, ...v, status: 'failed', message: 'An earlier attempt failed without taking effect. It has not been done.' });
  }
  return finish({ ...base, ...v, status: 'not_done', message: 'Not done yet.' });
}

/** dispatchTool performs the call of the tool named name; an unknown name is an outcome listing the tools. */
export function dispatchTool(tools: Tool[], run: ToolRun | undefined, name: string, args: unknown): Promise<ToolOutcome> {
  const t = tools.find((x) => x.definition.name === name);
  if (t) return t.call(run, args);
  const names = tools.map((x) => x.definition.name);
  return Promise.resolve(
    finish({ ...base, status: 'unknown_tool', isError: true, retryable: true, message: `There is no tool named ${JSON.stringify(name)}; the tools are ${JSON.stringify(names)}.` }),
  );
}

// ---- the SDKs' shapes --------------------------------------------------------

/** A Chat Completions function tool (not strict: a guarded tool's schema need not meet Structured Outputs' rules). */
export function toOpenAIChatTool(t: Tool) {
  const d = t.definition;
  return { type: 'function' as const, function: { name: d.name, description: d.description, parameters: d.parameters, strict: false } };
}

/** A Responses API function tool, not strict. */
export function toOpenAIResponsesTool(t: Tool) {
  const d = t.definition;
  return { type: 'function' as const, name: d.name, description: d.description, parameters: d.parameters, strict: false };
}

/** An Anthropic Messages API tool. */
export function toAnthropicTool(t: Tool) {
  const d = t.definition;
  return { name: d.name, description: d.description, input_schema: { type: 'object' as const, ...d.parameters } };
}

/** An MCP tool, with its annotations: idempotent, and read-only for check_already_done. */
export function toMcpTool(t: Tool) {
  const d = t.definition;
  return { name: d.name, description: d.description, inputSchema: { type: 'object' as const, ...d.parameters }, annotations: { idempotentHint: true, readOnlyHint: t.readOnly } };
}

/** The tool message answering a Chat Completions tool call. */
export function openAIChatToolMessage(toolCallId: string, o: ToolOutcome) {
  return { role: 'tool' as const, tool_call_id: toolCallId, content: o.text };
}

/** The function_call_output item answering a Responses API function call. */
export function openAIResponsesOutput(callId: string, o: ToolOutcome) {
  return { type: 'function_call_output' as const, call_id: callId, output: o.text };
}

/** The tool_result block answering an Anthropic tool_use block. */
export function anthropicToolResult(toolUseId: string, o: ToolOutcome) {
  return { type: 'tool_result' as const, tool_use_id: toolUseId, content: o.text, is_error: o.isError };
}

/** The result of an MCP tools/call, with the loop's flags in _meta.replyonce. */
export function mcpToolResult(o: ToolOutcome) {
  return {
    content: [{ type: 'text' as const, text: o.text }],
    isError: o.isError,
    _meta: { replyonce: { status: o.status, terminal: o.terminal, retryable: o.retryable, escalate: o.escalate } },
  };
}

/** Handles one Chat Completions tool call: the tool message and the outcome (stop the loop on terminal). */
export async function handleOpenAIChatToolCall(tools: Tool[], run: ToolRun | undefined, call: { id: string; type?: string; function?: { name: string; arguments: string }; custom?: { name: string } }) {
  const outcome =
    call.type && call.type !== 'function'
      ? await dispatchTool(tools, run, `${call.type}:${call.custom?.name ?? ''}`, undefined)
      : await dispatchTool(tools, run, call.function?.name ?? '', call.function?.arguments);
  return { message: openAIChatToolMessage(call.id, outcome), outcome };
}

/** Handles one Responses API function_call item. */
export async function handleOpenAIResponsesCall(tools: Tool[], run: ToolRun | undefined, call: { call_id: string; name: string; arguments: string }) {
  const outcome = await dispatchTool(tools, run, call.name, call.arguments);
  return { item: openAIResponsesOutput(call.call_id, outcome), outcome };
}

/** Handles one Anthropic tool_use block. */
export async function handleAnthropicToolUse(tools: Tool[], run: ToolRun | undefined, use: { id: string; name: string; input: unknown }) {
  const outcome = await dispatchTool(tools, run, use.name, use.input);
  return { block: anthropicToolResult(use.id, outcome), outcome };
}

/** Handles one MCP tools/call request's params. */
export async function handleMcpToolCall(tools: Tool[], run: ToolRun | undefined, params: { name: string; arguments?: unknown }) {
  const outcome = await dispatchTool(tools, run, params.name, params.arguments);
  return { result: mcpToolResult(outcome), outcome };
}
