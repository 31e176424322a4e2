// claim → effect → settle, as the Go ledger's RunEffect drives it, so that
// an effect's error maps to the same outcome in every language.

import { LedgerError, type ErrorClass } from './errors.js';
import type { Claim, ClaimRef, ClaimRequest, Effect, Entry, Outcome, Reconciler, Result } from './types.js';

/** The two-phase API as runEffect drives it. */
export interface Attempts {
  claim(req: ClaimRequest, signal?: AbortSignal): Promise<Claim>;
  settle(ref: ClaimRef, outcome: Outcome, value?: unknown, effectError?: string): Promise<Result>;
  reconciled(ref: ClaimRef, outcome: 'committed' | 'not_applied'): Promise<Entry>;
}

export interface LoopOptions {
  classify: (err: unknown) => ErrorClass;
  reconcile?: Reconciler;
  waitMs: number;
  waitIntervalMs: number;
  now: () => number;
  signal?: AbortSignal;
}

/**
 * runEffect performs effect at most once for req: claim; if claimed, run the
 * effect until the claim's deadline and settle what it came to (its value:
 * committed; a NotApplied error: not_applied; any other error: unknown, so
 * ambiguous); if ambiguous, ask the reconciler once; if in flight, wait when
 * asked to. A settle that fails after the effect ran throws a LedgerError
 * that says so.
 */
export async function runEffect<T>(a: Attempts, req: ClaimRequest, effect: Effect<T>, o: LoopOptions): Promise<Result> {
  const waitUntil = o.now() + o.waitMs;
  let reconciled = false;
  for (;;) {
    const c = await a.claim(req, o.signal);
    if (c.status === 'claimed') {
      return perform(a, req, c, effect, o);
    }
    if (c.status === 'ambiguous' && c.entry && o.reconcile && !reconciled) {
      reconciled = true;
      const { again, result } = await reconcile(a, c, o.reconcile);
      if (!again) return result;
      continue;
    }
    if (c.status === 'in_flight' && o.waitMs > 0 && o.now() < waitUntil) {
      await sleep(o.waitIntervalMs, o.signal);
      continue;
    }
    return c;
  }
}

async function perform<T>(a: Attempts, req: ClaimRequest, c: Claim, effect: Effect<T>, o: LoopOptions): Promise<Result> {
  const ref: ClaimRef = { scope: c.scope, entryId: c.entryId!, attempt: c.attempt! };
  const deadline = c.deadline ?? new Date(o.now());
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new Error('the claim reached its deadline')), Math.max(0, deadline.getTime() - o.now()));
  const onAbort = () => ctl.abort(o.signal!.reason);
  if (o.signal?.aborted) onAbort();
  o.signal?.addEventListener('abort', onAbort, { once: true });
  let value: unknown;
  let failure: unknown;
  let failed = false;
  try {
    value = await effect({
      key: { scope: req.scope, intent: req.intent, payload: req.payload },
      entryId: c.entryId!,
      attempt: c.attempt!,
      idempotencyKey: c.idempotencyKey!,
      fencingToken: c.fencingToken,
      deadline,
      signal: ctl.signal,
    });
  } catch (err) {
    failed = true;
    failure = err;
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener('abort', onAbort);
  }
  let outcome: Outcome = 'committed';
  if (failed) outcome = o.classify(failure) === 'not_applied' ? 'not_applied' : 'unknown';
  try {
    return await a.settle(ref, outcome, failed ? undefined : value, failed ? errorText(failure) : undefined);
  } catch (err) {
    const code = err instanceof LedgerError ? err.code : 'store_unavailable';
    const status = err instanceof LedgerError ? err.status : 0;
    throw new LedgerError(code, `the effect ran but its outcome could not be recorded: ${(err as Error).message}`, status, { cause: err });
  }
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

async function reconcile(a: Attempts, c: Claim, rec: Reconciler): Promise<{ again: boolean; result: Result }> {
  let outcome: string;
  try {
    outcome = await rec(c.entry!);
  } catch {
    return { again: false, result: c };
  }
  if (outcome !== 'committed' && outcome !== 'not_applied') return { again: false, result: c };
  let e: Entry;
  try {
    e = await a.reconciled({ scope: c.scope, entryId: c.entry!.id, attempt: c.entry!.attempt }, outcome);
  } catch (err) {
    if (err instanceof LedgerError && err.code === 'not_ambiguous') return { again: true, result: c };
    throw err;
  }
  if (outcome === 'committed') {
    return { again: false, result: { status: 'replayed', value: e.value, entry: e, ok: true } };
  }
  return { again: true, result: c };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
