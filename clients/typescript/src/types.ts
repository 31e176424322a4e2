// The ledger's values as the client hands them out: the API's snake_case
// fields in camelCase, times as Date, durations in milliseconds.

import type { Json } from './canonical.js';

/** What a claim, a once, a settle or a check came to. */
export type Status = 'claimed' | 'executed' | 'replayed' | 'in_flight' | 'ambiguous' | 'failed' | 'refused';

/** Why a claim was refused. New reasons may appear; treat unknown ones as terminal. */
export type Reason =
  | 'superseded'
  | 'run_cancelled'
  | 'run_ended'
  | 'busy'
  | 'conversation_changed'
  | 'exhausted'
  | 'rate_limited'
  | (string & {});

export type EntryState = 'pending' | 'committed' | 'failed' | 'ambiguous';
export type Mode = 'supersede' | 'exclusive' | 'independent';
export type ConflictMode = 'any' | 'same-intent' | 'none';
/** What an attempt came to: it happened, it certainly did not, or nobody knows. */
export type Outcome = 'committed' | 'not_applied' | 'unknown';

/** Names one effect: what (intent) is done to which business object (payload) in which scope. */
export interface Key {
  scope: string;
  intent: string;
  payload?: unknown;
}

/** One effect in a scope's ledger. */
export interface Entry {
  id: string;
  scope: string;
  intent: string;
  payload: Json;
  summary?: string;
  state: EntryState;
  attempt: number;
  failures?: number;
  maxAttempts?: number;
  runId?: string;
  token?: number;
  delivery?: number;
  claimedAt?: Date;
  pendingTtlMs?: number;
  deadline?: Date;
  redeliverable?: boolean;
  settledAt?: Date;
  landedSeq?: number;
  value?: Json;
  error?: string;
  abandoned?: boolean;
  lateSettle?: boolean;
  resolvedBy?: string;
  /** Pass it to providers that accept an idempotency key. */
  idempotencyKey: string;
}

/**
 * A ledger result. Ledger outcomes are values, never exceptions: only a
 * store or network failure (or invalid input) throws a LedgerError.
 */
export interface Result {
  status: Status;
  reason?: Reason;
  /** The effect's stored value (executed, replayed). */
  value?: Json;
  /** The effect's own error (failed, ambiguous). */
  error?: string;
  lateSettle?: boolean;
  entry?: Entry;
  /** The writes another run made under this one (conversation_changed). */
  conflicts?: Entry[];
  /** True when the effect is known to have happened (executed or replayed). */
  ok: boolean;
}

/** A claim's answer. When status is 'claimed', you own the attempt and must settle it before deadline. */
export interface Claim extends Result {
  scope: string;
  entryId?: string;
  attempt?: number;
  idempotencyKey?: string;
  fencingToken?: number;
  deadline?: Date;
}

/** Names a claimed attempt, for settle and reconciled. */
export interface ClaimRef {
  scope: string;
  entryId: string;
  attempt: number;
}

export interface CheckResult {
  done: boolean;
  /** replayed (done), in_flight, ambiguous, failed, or undefined when never claimed. */
  status?: Status;
  entry?: Entry;
}

export interface ClaimRequest extends Key {
  runId?: string;
  token?: number;
  summary?: string;
  conflict?: ConflictMode;
  ack?: boolean;
  pendingTtlMs?: number;
  redeliverable?: boolean;
  maxAttempts?: number;
}

export interface OnceOptions {
  /** Describes the effect to other runs that conflict with it. */
  summary?: string;
  /** Which other writes on the scope make this one stale (default 'any'). */
  conflict?: ConflictMode;
  ack?: boolean;
  pendingTtlMs?: number;
  redeliverable?: boolean;
  /** Wait up to this long for another attempt in flight to settle. */
  waitMs?: number;
  /** Aborts the call (and the effect's signal). */
  signal?: AbortSignal;
}

/** What an effect learns about its attempt. */
export interface EffectContext {
  key: Key;
  entryId: string;
  attempt: number;
  /** Stable across attempts, workers and languages: pass it to providers that accept one. */
  idempotencyKey: string;
  fencingToken?: number;
  deadline: Date;
  /** Aborts when the claim would read as abandoned (its deadline), or when the caller's signal aborts. */
  signal: AbortSignal;
}

/** Performs a side effect; its value is stored and replayed. Throw NotApplied when it certainly did not happen. */
export type Effect<T = unknown> = (ctx: EffectContext) => Promise<T> | T;

export interface RunOptions {
  runId?: string;
  mode?: Mode;
  contextAt?: Date | string;
  leaseTtlMs?: number;
}

/** A reconciler's finding about an ambiguous entry. */
export type Reconciler = (entry: Entry) => Promise<'committed' | 'not_applied' | 'unknown'> | 'committed' | 'not_applied' | 'unknown';

// ---- wire shapes and conversions ------------------------------------------

/* eslint-disable @typescript-eslint/no-explicit-any */
type Wire = Record<string, any>;

function date(v: unknown): Date | undefined {
  return typeof v === 'string' && v !== '' ? new Date(v) : undefined;
}

function definedOnly<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) {
    if (o[k] === undefined) delete o[k];
  }
  return o;
}

export function entryFromWire(w: Wire): Entry {
  return definedOnly({
    id: w.id,
    scope: w.scope,
    intent: w.intent,
    payload: w.payload === undefined ? null : w.payload,
    summary: w.summary,
    state: w.state,
    attempt: w.attempt,
    failures: w.failures,
    maxAttempts: w.max_attempts,
    runId: w.run_id,
    token: w.token,
    delivery: w.delivery,
    claimedAt: date(w.claimed_at),
    pendingTtlMs: w.pending_ttl_ms,
    deadline: date(w.deadline),
    redeliverable: w.redeliverable,
    settledAt: date(w.settled_at),
    landedSeq: w.landed_seq,
    value: w.value,
    error: w.error,
    abandoned: w.abandoned,
    lateSettle: w.late_settle,
    resolvedBy: w.resolved_by,
    idempotencyKey: w.idempotency_key,
  });
}

export function resultFromWire(w: Wire): Result {
  return definedOnly({
    status: w.status,
    reason: w.reason,
    value: w.value,
    error: w.error,
    lateSettle: w.late_settle,
    entry: w.entry ? entryFromWire(w.entry) : undefined,
    conflicts: Array.isArray(w.conflicts) ? w.conflicts.map(entryFromWire) : undefined,
    ok: w.status === 'executed' || w.status === 'replayed',
  });
}

export function claimFromWire(w: Wire): Claim {
  return definedOnly({
    ...resultFromWire(w),
    scope: w.scope,
    entryId: w.entry_id,
    attempt: w.attempt,
    idempotencyKey: w.idempotency_key,
    fencingToken: w.fencing_token,
    deadline: date(w.deadline),
  });
}
