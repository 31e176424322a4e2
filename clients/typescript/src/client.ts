// The ledger API client: the shape of the Go client (ledger/ledgerapi),
// named in TypeScript's style. Every method is one HTTP call, except once,
// which runs the effect here between a remote claim and a remote settle.

import { LedgerError, classifyError as defaultClassify, type ErrorClass } from './errors.js';
import {
  claimFromWire,
  entryFromWire,
  resultFromWire,
  type CheckResult,
  type Claim,
  type ClaimRef,
  type ClaimRequest,
  type Effect,
  type Entry,
  type Key,
  type Mode,
  type OnceOptions,
  type Outcome,
  type Reason,
  type Reconciler,
  type Result,
  type RunOptions,
} from './types.js';
import { runEffect, type Attempts } from './loop.js';

export interface LedgerClientOptions {
  /** The gateway's admin listener, e.g. "http://127.0.0.1:8081". */
  baseUrl: string;
  /** admin.token; empty sends no Authorization header. */
  token?: string;
  /** Bounds every request (default 30 s). */
  timeoutMs?: number;
  /** Decides whether an effect's error means not applied or ambiguous (default: NotApplied only). */
  classifyError?: (err: unknown) => ErrorClass;
  /** Asked about an ambiguous effect by once; its answer is recorded on the ledger. */
  reconcile?: Reconciler;
  /** How often a once with waitMs looks at an in-flight effect again (default 50 ms). */
  waitIntervalMs?: number;
  /** The clock that times deadlines and waits (default Date.now). */
  now?: () => number;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
}

/**
 * LedgerClient speaks the gateway's ledger API. It never retries by itself:
 * a claim whose answer was lost reads as in_flight on the next try, which
 * only the caller can judge.
 */
export class LedgerClient implements Attempts {
  readonly baseUrl: string;
  readonly #token: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly classify: (err: unknown) => ErrorClass;
  readonly reconcile?: Reconciler;
  readonly waitIntervalMs: number;
  readonly now: () => number;

  constructor(options: LedgerClientOptions) {
    let u: URL;
    try {
      u = new URL(options.baseUrl);
    } catch {
      throw new TypeError(`LedgerClient: baseUrl ${JSON.stringify(options.baseUrl)} must be an http:// or https:// URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new TypeError(`LedgerClient: baseUrl ${JSON.stringify(options.baseUrl)} must be an http:// or https:// URL`);
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#token = options.token ?? '';
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.classify = options.classifyError ?? defaultClassify;
    this.reconcile = options.reconcile;
    this.waitIntervalMs = options.waitIntervalMs ?? 50;
    this.now = options.now ?? Date.now;
  }

  /** Sends one request and returns the decoded 200 answer. */
  async request<T = Record<string, unknown>>(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (this.#token) headers.Authorization = `Bearer ${this.#token}`;
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const both = signal ? anySignal(signal, timeout) : timeout;
    let resp: Response;
    let text: string;
    try {
      resp = await this.#fetch(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: both,
      });
      text = await resp.text();
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new LedgerError('store_unavailable', `ledger API ${method} ${path}: ${(err as Error).message ?? err}`, 0, { cause: err });
    }
    if (resp.status !== 200) {
      let code = '';
      let message = text.trim();
      try {
        const e = JSON.parse(text) as { error?: { code?: string; message?: string } };
        code = e.error?.code ?? '';
        message = e.error?.message ?? message;
      } catch {
        // Not the API's error shape: a proxy or a wrong URL.
      }
      if (!code) code = resp.status >= 500 ? 'store_unavailable' : `http_${resp.status}`;
      throw new LedgerError(code, `ledger API ${method} ${path}: ${resp.status} ${code}: ${message}`, resp.status);
    }
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new LedgerError('store_unavailable', `ledger API ${method} ${path}: the answer is not JSON`, resp.status, { cause: err });
    }
  }

  /** Starts a run on scope, or resumes it as a new delivery when runId names an existing one. */
  async begin(scope: string, options: RunOptions = {}): Promise<Run> {
    const w = await this.request<Record<string, any>>('POST', '/v1/runs', {
      scope,
      run_id: options.runId || undefined,
      mode: options.mode || undefined,
      context_at: options.contextAt instanceof Date ? options.contextAt.toISOString() : options.contextAt || undefined,
      lease_ttl_ms: options.leaseTtlMs || undefined,
    });
    return new Run(this, {
      scope: w.scope,
      id: w.run_id,
      mode: w.mode,
      token: w.token,
      delivery: w.delivery,
      contextAt: w.context_at ? new Date(w.context_at) : undefined,
      canWrite: w.can_write,
      reason: w.reason,
    });
  }

  /**
   * A handle on a run that began elsewhere, typically the gateway delivery
   * whose Replyonce-Scope, Replyonce-Run-Id and Replyonce-Fencing-Token
   * headers name it. It makes no call.
   */
  runRef(scope: string, runId: string, token: number): Run {
    return new Run(this, { scope, id: runId, token, canWrite: true });
  }

  /** Asks for the right to perform an effect (first phase). */
  async claim(req: ClaimRequest, signal?: AbortSignal): Promise<Claim> {
    const w = await this.request('POST', '/v1/claims', {
      scope: req.scope,
      intent: req.intent,
      payload: req.payload === undefined ? null : req.payload,
      run_id: req.runId || undefined,
      token: req.token || undefined,
      summary: req.summary || undefined,
      conflict: req.conflict || undefined,
      ack: req.ack || undefined,
      pending_ttl_ms: req.pendingTtlMs || undefined,
      redeliverable: req.redeliverable || undefined,
      max_attempts: req.maxAttempts || undefined,
    }, signal);
    return claimFromWire(w);
  }

  /** Records the outcome of a claimed attempt (second phase). */
  async settle(ref: ClaimRef, outcome: Outcome, value?: unknown, effectError?: string): Promise<Result> {
    const w = await this.request('POST', '/v1/claims/settle', {
      scope: ref.scope,
      entry_id: ref.entryId,
      attempt: ref.attempt,
      outcome,
      value: outcome === 'committed' && value !== undefined ? value : undefined,
      error: effectError || undefined,
    });
    const res = resultFromWire(w);
    if (effectError) res.error = effectError;
    return res;
  }

  /** Performs effect at most once for key, with no run fencing. */
  once<T>(key: Key, effect: Effect<T>, options: OnceOptions = {}): Promise<Result> {
    return runEffect(this, claimRequest(key, undefined, undefined, options), effect, this.#loop(options));
  }

  #loop(o: OnceOptions) {
    return {
      classify: this.classify,
      reconcile: this.reconcile,
      waitMs: o.waitMs ?? 0,
      waitIntervalMs: this.waitIntervalMs,
      now: this.now,
      signal: o.signal,
    };
  }

  /** Records what a reconciler found about the ambiguous attempt ref names; LedgerError not_ambiguous when it moved on. */
  async reconciled(ref: ClaimRef, outcome: 'committed' | 'not_applied'): Promise<Entry> {
    const w = await this.request<{ entry: Record<string, unknown> }>('POST', '/v1/entries/resolve', {
      scope: ref.scope,
      entry_id: ref.entryId,
      attempt: ref.attempt,
      by: 'reconciler',
      outcome,
    });
    return entryFromWire(w.entry);
  }

  /** Was key's effect already done? Reads only. */
  async check(key: Key): Promise<CheckResult> {
    const w = await this.request<Record<string, any>>('POST', '/v1/check', {
      scope: key.scope,
      intent: key.intent,
      payload: key.payload === undefined ? null : key.payload,
    });
    const out: CheckResult = { done: w.done };
    if (w.status) out.status = w.status;
    if (w.entry) out.entry = entryFromWire(w.entry);
    return out;
  }

  /** A scope's entries, oldest first. */
  async history(scope: string): Promise<Entry[]> {
    if (!scope) throw new LedgerError('invalid_request', 'history: scope is empty');
    const w = await this.request<{ entries: Record<string, unknown>[] }>('GET', `/v1/scopes/${encodeURIComponent(scope)}/history`);
    return w.entries.map(entryFromWire);
  }

  /** Renews a run's lease by reference; false means stop. */
  async heartbeat(scope: string, runId: string, token: number): Promise<boolean> {
    const w = await this.request<{ alive: boolean }>('POST', '/v1/runs/heartbeat', { scope, run_id: runId, token });
    return w.alive;
  }

  /** Finishes a run by reference (an operator's action: not fenced on a delivery). */
  async end(scope: string, runId: string, reason?: string): Promise<void> {
    await this.request('POST', '/v1/runs/end', { scope, run_id: runId, reason: reason || undefined });
  }

  /** Stops a run: its later claims are refused run_cancelled. */
  async cancel(scope: string, runId: string): Promise<void> {
    await this.request('POST', '/v1/runs/cancel', { scope, run_id: runId });
  }

  /** Entries whose outcome is unknown, from up to limit scopes (default: the server's 100). */
  async ambiguous(limit = 0): Promise<Entry[]> {
    const w = await this.request<{ entries: Record<string, unknown>[] }>('GET', '/v1/ambiguous' + (limit > 0 ? `?limit=${limit}` : ''));
    return w.entries.map(entryFromWire);
  }

  /** Records what an operator found about an ambiguous effect, named by its key. */
  async resolve(key: Key, outcome: 'committed' | 'not_applied'): Promise<Entry> {
    const w = await this.request<{ entry: Record<string, unknown> }>('POST', '/v1/entries/resolve', {
      scope: key.scope,
      intent: key.intent,
      payload: key.payload === undefined ? null : key.payload,
      outcome,
    });
    return entryFromWire(w.entry);
  }

  /** resolve by scope and entry id, as ambiguous lists them. */
  async resolveEntry(scope: string, entryId: string, outcome: 'committed' | 'not_applied'): Promise<Entry> {
    if (!entryId) throw new LedgerError('invalid_request', 'resolveEntry: entry id is empty');
    const w = await this.request<{ entry: Record<string, unknown> }>('POST', '/v1/entries/resolve', { scope, entry_id: entryId, outcome });
    return entryFromWire(w.entry);
  }

  /** @internal */
  onceFor<T>(req: ClaimRequest, effect: Effect<T>, options: OnceOptions): Promise<Result> {
    return runEffect(this, req, effect, this.#loop(options));
  }
}

function claimRequest(key: Key, runId: string | undefined, token: number | undefined, o: OnceOptions): ClaimRequest {
  return {
    scope: key.scope,
    intent: key.intent,
    payload: key.payload,
    runId,
    token,
    summary: o.summary,
    conflict: o.conflict,
    ack: o.ack,
    pendingTtlMs: o.pendingTtlMs,
    redeliverable: o.redeliverable,
  };
}

/** A remote run: the fields of the Go client's Run, and its methods, each a call to the API. */
export class Run {
  readonly scope: string;
  readonly id: string;
  readonly mode?: Mode;
  /** This delivery's fencing token: writes carrying an older one are refused. */
  readonly token: number;
  readonly delivery?: number;
  readonly contextAt?: Date;
  readonly canWrite: boolean;
  readonly reason?: Reason;
  readonly #client: LedgerClient;

  constructor(
    client: LedgerClient,
    f: { scope: string; id: string; mode?: Mode; token: number; delivery?: number; contextAt?: Date; canWrite: boolean; reason?: Reason },
  ) {
    this.#client = client;
    this.scope = f.scope;
    this.id = f.id;
    this.mode = f.mode;
    this.token = f.token;
    this.delivery = f.delivery;
    this.contextAt = f.contextAt;
    this.canWrite = f.canWrite;
    this.reason = f.reason;
  }

  /** Performs a fenced effect at most once: refused when the run may no longer write or the scope changed under it. */
  once<T>(intent: string, payload: unknown, effect: Effect<T>, options: OnceOptions = {}): Promise<Result> {
    return this.#client.onceFor(claimRequest({ scope: this.scope, intent, payload }, this.id, this.token, options), effect, options);
  }

  /** The first phase of once for this run. */
  claim(intent: string, payload: unknown, options: OnceOptions = {}): Promise<Claim> {
    return this.#client.claim(claimRequest({ scope: this.scope, intent, payload }, this.id, this.token, options), options.signal);
  }

  /** Was this effect already done on the run's scope? */
  check(intent: string, payload: unknown): Promise<CheckResult> {
    return this.#client.check({ scope: this.scope, intent, payload });
  }

  /** Renews the lease; false means the run may no longer write and should stop. */
  heartbeat(): Promise<boolean> {
    return this.#client.heartbeat(this.scope, this.id, this.token);
  }

  /** Finishes the run, fenced on this delivery's token: a stale delivery's end changes nothing. */
  async end(reason?: string): Promise<void> {
    await this.#client.request('POST', '/v1/runs/end', { scope: this.scope, run_id: this.id, token: this.token, reason: reason || undefined });
  }
}

/** An AbortSignal that aborts when either does (AbortSignal.any needs Node 20). */
export function anySignal(a: AbortSignal, b: AbortSignal): AbortSignal {
  const c = new AbortController();
  for (const s of [a, b]) {
    if (s.aborted) {
      c.abort(s.reason);
      return c.signal;
    }
  }
  const onA = () => c.abort(a.reason);
  const onB = () => c.abort(b.reason);
  a.addEventListener('abort', onA, { once: true });
  b.addEventListener('abort', onB, { once: true });
  c.signal.addEventListener('abort', () => {
    a.removeEventListener('abort', onA);
    b.removeEventListener('abort', onB);
  }, { once: true });
  return c.signal;
}
