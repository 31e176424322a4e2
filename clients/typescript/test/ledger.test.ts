// The client against the real gateway binary's ledger API: the seed's
// races, the error-to-outcome mapping of the Go loop, and the calls around
// them.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { LedgerClient, LedgerError, NotApplied, entryId, type EffectContext } from '../src/index.js';
import { ledgerConfig, startGateway, type Gateway } from './gateway.js';

let gw: Gateway;
let client: LedgerClient;
const token = 'ts-suite-token-0123456789';

before(async () => {
  gw = await startGateway(ledgerConfig(token));
  client = new LedgerClient({ baseUrl: gw.adminUrl, token });
});
after(async () => {
  await gw?.stop();
});

let n = 0;
const fresh = (name: string) => `ts-${name}-${process.pid}-${++n}`;

/** A promise and the function that settles it. */
function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

test('three concurrent onces run the effect once, and a late retry replays it', async () => {
  const scope = fresh('order');
  let refunds = 0;
  const refund = () =>
    client.once({ scope, intent: 'refund', payload: { order: 'A-1001', cents: 2500 } }, async (ctx) => {
      refunds++;
      await new Promise((r) => setTimeout(r, 50));
      return { refund_id: 're_1', key: ctx.idempotencyKey };
    });
  const raced = await Promise.all([refund(), refund(), refund()]);
  const late = await refund();
  assert.deepEqual(raced.map((r) => r.status).sort(), ['executed', 'in_flight', 'in_flight']);
  assert.equal(late.status, 'replayed');
  assert.ok(late.ok);
  const id = entryId(scope, 'refund', { cents: 2500, order: 'A-1001' });
  assert.deepEqual(late.value, { refund_id: 're_1', key: 'ro_' + id });
  assert.equal(late.entry?.id, id, 'the gateway names the effect as the client does');
  assert.equal(refunds, 1);
});

test('a superseded run is refused and its effect does not run', async () => {
  const scope = fresh('conv');
  const old = await client.begin(scope, { runId: 'm1', mode: 'supersede', contextAt: new Date(Date.now() - 2000) });
  const newer = await client.begin(scope, { runId: 'm2', mode: 'supersede', contextAt: new Date(Date.now() - 1000) });
  assert.ok(newer.token > old.token);
  let sent = 0;
  const r = await old.once('tag', 'billing', () => sent++);
  assert.equal(r.status, 'refused');
  assert.equal(r.reason, 'superseded');
  assert.equal(sent, 0);
  assert.equal(await old.heartbeat(), false);
  assert.equal(await newer.heartbeat(), true);
  // A later delivery of the same run takes it over and fences the earlier one.
  const again = await client.begin(scope, { runId: 'm2', mode: 'supersede' });
  assert.equal(again.delivery, 2);
  assert.equal((await newer.once('tag', 'vip', () => sent++)).reason, 'superseded');
  assert.equal((await again.once('tag', 'vip', () => sent++)).status, 'executed');
  assert.equal(sent, 1);
});

test('conversation_changed carries the conflicting write, and the run goes through after it re-read', async () => {
  const scope = fresh('conv');
  const r1 = await client.begin(scope, { runId: 'm1', contextAt: new Date(Date.now() - 1000) });
  const hold = gate();
  const started = gate();
  const first = r1.once('reply', { answers: ['m1'] }, async () => {
    started.open();
    await hold.p;
    return { message_id: 'r1' };
  }, { summary: 'Thanks, we got m1', conflict: 'same-intent' });
  await started.p;
  const r2 = await client.begin(scope, { runId: 'm2' });
  let sent = 0;
  const changed = await r2.once('reply', { answers: ['m1', 'm2'] }, () => sent++, { conflict: 'same-intent' });
  assert.equal(changed.status, 'refused');
  assert.equal(changed.reason, 'conversation_changed');
  assert.equal(changed.conflicts?.length, 1);
  assert.equal(changed.conflicts?.[0].summary, 'Thanks, we got m1');
  assert.equal(changed.conflicts?.[0].state, 'pending');
  hold.open();
  assert.equal((await first).status, 'executed');
  // After re-reading (m1 is answered now), the run answers m2 only.
  const second = await r2.once('reply', { answers: ['m2'] }, () => ({ message_id: 'r2' }), { conflict: 'same-intent' });
  assert.equal(second.status, 'executed');
  assert.equal(sent, 0);
  const hist = await client.history(scope);
  assert.deepEqual(hist.filter((e) => e.intent === 'reply').map((e) => e.state), ['committed', 'committed']);
});

test('errors map to outcomes as the Go loop maps them', async () => {
  const scope = fresh('errors');
  const failed = await client.once({ scope, intent: 'charge', payload: 1 }, () => {
    throw new NotApplied('card declined');
  });
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error, 'card declined');
  // failed is known not applied: the next attempt may run.
  assert.equal((await client.once({ scope, intent: 'charge', payload: 1 }, () => 'ok')).status, 'executed');
  const amb = await client.once({ scope, intent: 'refund', payload: 2 }, () => {
    throw new Error('socket hang up');
  });
  assert.equal(amb.status, 'ambiguous');
  let ran = 0;
  const again = await client.once({ scope, intent: 'refund', payload: 2 }, () => ran++);
  assert.equal(again.status, 'ambiguous', 'an unknown outcome is never retried blindly');
  assert.equal(ran, 0);
  const check = await client.check({ scope, intent: 'refund', payload: 2 });
  assert.deepEqual([check.done, check.status], [false, 'ambiguous']);
  const listed = await client.ambiguous(1000);
  const entry = listed.find((e) => e.scope === scope)!;
  assert.ok(entry, 'the ambiguous entry is listed');
  const resolved = await client.resolveEntry(scope, entry.id, 'committed');
  assert.equal(resolved.state, 'committed');
  assert.equal((await client.check({ scope, intent: 'refund', payload: 2 })).done, true);
  // A custom classifier may call more errors not applied.
  const lenient = new LedgerClient({ baseUrl: gw.adminUrl, token, classifyError: (e) => ((e as Error).message === '409' ? 'not_applied' : 'ambiguous') });
  const r = await lenient.once({ scope, intent: 'ticket', payload: 3 }, () => {
    throw new Error('409');
  });
  assert.equal(r.status, 'failed');
});

test('a reconciler settles an ambiguous effect; wait sees an in-flight one finish', async () => {
  const scope = fresh('rec');
  await client.once({ scope, intent: 'send', payload: 'x' }, () => {
    throw new Error('timeout');
  });
  const rec = new LedgerClient({ baseUrl: gw.adminUrl, token, reconcile: async (e) => (e.intent === 'send' ? 'committed' : 'unknown') });
  const r = await rec.once({ scope, intent: 'send', payload: 'x' }, () => {
    throw new Error('must not run');
  });
  assert.equal(r.status, 'replayed');
  assert.equal(r.entry?.resolvedBy, 'reconciler');

  const hold = gate();
  const started = gate();
  const first = client.once({ scope, intent: 'slow', payload: 1 }, async () => {
    started.open();
    await hold.p;
    return 'done';
  });
  await started.p;
  const waiting = client.once({ scope, intent: 'slow', payload: 1 }, () => 'twice', { waitMs: 10_000 });
  setTimeout(hold.open, 100);
  assert.equal((await first).status, 'executed');
  const w = await waiting;
  assert.equal(w.status, 'replayed');
  assert.equal(w.value, 'done');
});

test('the effect gets the idempotency key and a signal that aborts at the claim\'s deadline', async () => {
  const scope = fresh('deadline');
  let seen: EffectContext | undefined;
  const r = await client.once({ scope, intent: 'call', payload: 1 }, (ctx) => {
    seen = ctx;
    return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
  }, { pendingTtlMs: 300 });
  assert.equal(r.status, 'ambiguous', 'an effect cut off at its deadline may have happened');
  assert.ok(seen!.signal.aborted);
  assert.equal(seen!.idempotencyKey, 'ro_' + entryId(scope, 'call', 1));
  assert.equal(seen!.attempt, 1);
});

test('runs: heartbeat, end, cancel, a run ref', async () => {
  const scope = fresh('run');
  const run = await client.begin(scope, { runId: 'job-1', mode: 'exclusive', leaseTtlMs: 60_000 });
  assert.ok(run.canWrite);
  assert.equal(run.mode, 'exclusive');
  const ref = client.runRef(scope, 'job-1', run.token);
  assert.equal(await ref.heartbeat(), true);
  assert.equal((await ref.once('note', 'a', () => 1)).status, 'executed');
  assert.equal((await ref.check('note', 'a')).done, true);
  await ref.end('answered');
  assert.equal((await ref.once('note', 'b', () => 1)).reason, 'run_ended');
  const other = await client.begin(scope, { runId: 'job-2', mode: 'exclusive' });
  await client.cancel(scope, 'job-2');
  assert.equal((await other.once('note', 'c', () => 1)).reason, 'run_cancelled');
  await assert.rejects(client.heartbeat(scope, 'nope', 1), (e: unknown) => e instanceof LedgerError && e.code === 'unknown_run' && e.status === 404);
  await assert.rejects(client.end(scope, 'nope'), (e: unknown) => e instanceof LedgerError && e.code === 'unknown_run');
});

test('a typed error for what the ledger did not decide', async () => {
  const wrong = new LedgerClient({ baseUrl: gw.adminUrl, token: 'wrong' });
  await assert.rejects(wrong.check({ scope: 's', intent: 'x' }), (e: unknown) => e instanceof LedgerError && e.code === 'unauthorized' && e.status === 401 && !e.unavailable);
  const down = new LedgerClient({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 2000 });
  await assert.rejects(down.check({ scope: 's', intent: 'x' }), (e: unknown) => e instanceof LedgerError && e.unavailable && e.status === 0);
  await assert.rejects(client.once({ scope: '', intent: 'x' }, () => 1), (e: unknown) => e instanceof LedgerError && e.code === 'invalid_request');
  assert.throws(() => new LedgerClient({ baseUrl: 'ftp://x' }), TypeError);
});
