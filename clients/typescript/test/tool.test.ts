import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  LedgerError,
  anthropicToolResult,
  checkTool,
  dispatchTool,
  guardTool,
  handleAnthropicToolUse,
  handleMcpToolCall,
  handleOpenAIChatToolCall,
  handleOpenAIResponsesCall,
  toAnthropicTool,
  toMcpTool,
  toOpenAIChatTool,
  toOpenAIResponsesTool,
  toolOutcome,
  type CheckResult,
  type Result,
  type ToolRun,
} from '../src/index.js';

// A run whose answers the test picks, recording what it was asked.
function fakeRun(answer: Partial<Result> | Error, check: CheckResult = { done: false }) {
  const calls: { intent: string; payload: unknown; options?: unknown }[] = [];
  const run: ToolRun = {
    async once(intent, payload, effect, options) {
      calls.push({ intent, payload, options });
      if (answer instanceof Error) throw answer;
      if (answer.status === 'executed') {
        const value = await effect({ key: { scope: 's', intent, payload }, entryId: 'e', attempt: 1, idempotencyKey: 'ro_e', deadline: new Date(), signal: new AbortController().signal });
        return { status: 'executed', value: value as never, ok: true };
      }
      return { ok: false, ...answer } as Result;
    },
    async check(intent, payload) {
      calls.push({ intent, payload });
      return check;
    },
  };
  return { run, calls };
}

const refund = guardTool<{ order: string; cents: number; note?: string }>({
  name: 'refund',
  description: 'Refund an order',
  parameters: { type: 'object', properties: { order: { type: 'string' }, cents: { type: 'integer' } }, required: ['order', 'cents'] },
  identity: (a) => {
    if (!a.order) throw new Error('order is required');
    return { order: a.order, cents: a.cents };
  },
  execute: (a) => ({ refund_id: `re_${a.order}` }),
  summary: (a) => `refund ${a.cents} on ${a.order}`,
  conflict: 'same-intent',
});

test('a guarded call goes through once with the identity, never the wording', async () => {
  const { run, calls } = fakeRun({ status: 'executed' });
  const o = await refund.call(run, '{"order":"A-1","cents":2500,"note":"sorry!"}');
  assert.equal(o.status, 'executed');
  assert.deepEqual(JSON.parse(o.text), { status: 'executed', message: 'Done.', result: { refund_id: 're_A-1' } });
  assert.deepEqual(calls[0].payload, { order: 'A-1', cents: 2500 });
  assert.deepEqual(calls[0].options, { summary: 'refund 2500 on A-1', conflict: 'same-intent', waitMs: undefined, pendingTtlMs: undefined });
});

test('every ledger answer maps to the flags the Go tool package gives it', () => {
  const cases: [Partial<Result>, string, [boolean, boolean, boolean, boolean]][] = [
    // status, then [isError, terminal, retryable, escalate]
    [{ status: 'executed' }, 'executed', [false, false, false, false]],
    [{ status: 'replayed' }, 'replayed', [false, false, false, false]],
    [{ status: 'in_flight' }, 'in_flight', [true, false, true, false]],
    [{ status: 'failed', error: 'declined' }, 'failed', [true, false, true, false]],
    [{ status: 'ambiguous', error: 'timeout' }, 'ambiguous', [true, true, false, true]],
    [{ status: 'refused', reason: 'conversation_changed', conflicts: [] }, 'conversation_changed', [true, false, true, false]],
    [{ status: 'refused', reason: 'busy' }, 'busy', [true, false, true, false]],
    [{ status: 'refused', reason: 'superseded' }, 'superseded', [true, true, false, false]],
    [{ status: 'refused', reason: 'run_cancelled' }, 'run_cancelled', [true, true, false, false]],
    [{ status: 'refused', reason: 'run_ended' }, 'run_ended', [true, true, false, false]],
    [{ status: 'refused', reason: 'exhausted' }, 'exhausted', [true, true, false, true]],
    [{ status: 'refused', reason: 'rate_limited' }, 'rate_limited', [true, true, false, true]],
    [{ status: 'refused', reason: 'something_new' }, 'something_new', [true, true, false, true]],
  ];
  for (const [r, status, flags] of cases) {
    const o = toolOutcome({ ok: false, ...r } as Result);
    assert.equal(o.status, status);
    assert.deepEqual([o.isError, o.terminal, o.retryable, o.escalate], flags, status);
    assert.equal(JSON.parse(o.text).status, status);
  }
  assert.match(toolOutcome({ status: 'ambiguous', error: 'timeout', ok: false }).message, /\(timeout\)/);
});

test('conflicts are told to the model with their summaries', () => {
  const o = toolOutcome({
    status: 'refused',
    reason: 'conversation_changed',
    ok: false,
    conflicts: [{ id: 'x', scope: 's', intent: 'reply', payload: null, state: 'pending', attempt: 1, summary: 'Thanks, we got it', idempotencyKey: 'ro_x' }],
  });
  assert.deepEqual(JSON.parse(o.text).conflicts, [{ intent: 'reply', state: 'pending', summary: 'Thanks, we got it' }]);
});

test('bad arguments, no run, an unknown run and an outage', async () => {
  const { run } = fakeRun({ status: 'executed' });
  assert.equal((await refund.call(run, '{"cents":1}')).status, 'invalid_arguments');
  assert.equal((await refund.call(run, '{not json')).status, 'invalid_arguments');
  assert.equal((await refund.call(undefined, '{}')).status, 'no_run');
  const unknown = await refund.call(fakeRun(new LedgerError('unknown_run', 'x', 404)).run, '{"order":"A","cents":1}');
  assert.equal(unknown.status, 'unknown_run');
  assert.ok(unknown.terminal && unknown.escalate);
  await assert.rejects(refund.call(fakeRun(new LedgerError('store_unavailable', 'down', 503)).run, '{"order":"A","cents":1}'), LedgerError);
});

test('check_already_done looks up the identity under the tool\'s intent', async () => {
  const check = checkTool(refund);
  const { run, calls } = fakeRun({ status: 'executed' }, { done: true, status: 'replayed', entry: { id: 'e', scope: 's', intent: 'refund', payload: null, state: 'committed', attempt: 1, value: { refund_id: 're_A' }, idempotencyKey: 'ro_e' } });
  const o = await check.call(run, { tool: 'refund', arguments: { order: 'A', cents: 5, note: 'x' } });
  assert.equal(o.status, 'done');
  assert.deepEqual(JSON.parse(o.text).result, { refund_id: 're_A' });
  assert.deepEqual(calls[0], { intent: 'refund', payload: { order: 'A', cents: 5 } });
  assert.equal((await check.call(run, { tool: 'nope', arguments: {} })).status, 'invalid_arguments');
  assert.equal((await check.call(fakeRun({}, { done: false }).run, { tool: 'refund', arguments: { order: 'A', cents: 5 } })).status, 'not_done');
  assert.equal(check.readOnly, true);
  assert.throws(() => checkTool(check));
});

test('tools and results in the SDKs\' shapes', async () => {
  const check = checkTool(refund);
  assert.deepEqual(toOpenAIChatTool(refund), { type: 'function', function: { name: 'refund', description: 'Refund an order', parameters: refund.definition.parameters, strict: false } });
  assert.deepEqual(toOpenAIResponsesTool(refund), { type: 'function', name: 'refund', description: 'Refund an order', parameters: refund.definition.parameters, strict: false });
  assert.equal(toAnthropicTool(refund).input_schema.type, 'object');
  assert.deepEqual(toMcpTool(check).annotations, { idempotentHint: true, readOnlyHint: true });
  const { run } = fakeRun({ status: 'replayed', value: { refund_id: 're_1' } });
  const chat = await handleOpenAIChatToolCall([refund], run, { id: 'call_1', type: 'function', function: { name: 'refund', arguments: '{"order":"A","cents":1}' } });
  assert.equal(chat.message.role, 'tool');
  assert.equal(chat.message.tool_call_id, 'call_1');
  assert.equal(JSON.parse(chat.message.content).status, 'replayed');
  const resp = await handleOpenAIResponsesCall([refund], run, { call_id: 'c2', name: 'refund', arguments: '{"order":"A","cents":1}' });
  assert.deepEqual(Object.keys(resp.item), ['type', 'call_id', 'output']);
  const anth = await handleAnthropicToolUse([refund], run, { id: 'tu_1', name: 'refund', input: { order: 'A', cents: 1 } });
  assert.deepEqual(anth.block, anthropicToolResult('tu_1', anth.outcome));
  assert.equal(anth.block.is_error, false);
  const mcp = await handleMcpToolCall([refund], run, { name: 'refund', arguments: { order: 'A', cents: 1 } });
  assert.equal(mcp.result._meta.replyonce.status, 'replayed');
  const unknown = await dispatchTool([refund], run, 'delete_everything', '{}');
  assert.equal(unknown.status, 'unknown_tool');
  assert.ok(unknown.retryable);
  const custom = await handleOpenAIChatToolCall([refund], run, { id: 'c3', type: 'custom', custom: { name: 'refund' } });
  assert.equal(custom.outcome.status, 'unknown_tool');
});
