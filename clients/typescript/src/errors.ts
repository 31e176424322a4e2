// Errors. Ledger outcomes are never errors (they are Results); these are
// for what the ledger could not decide.

/** Error codes of the ledger API (match on them, never on messages). */
export type ErrorCode =
  | 'invalid_request'
  | 'unauthorized'
  | 'not_found'
  | 'method_not_allowed'
  | 'body_too_large'
  | 'unsupported_media_type'
  | 'unknown_run'
  | 'unknown_claim'
  | 'already_settled'
  | 'not_ambiguous'
  | 'store_unavailable'
  | 'delivery_in_flight'
  | 'unknown_escalation'
  | (string & {});

/**
 * LedgerError is a request the ledger did not decide: a non-2xx answer of
 * the API (with its code and HTTP status), or no answer at all (status 0,
 * code 'store_unavailable'). When `unavailable` is true nothing was decided
 * and retrying later is safe.
 */
export class LedgerError extends Error {
  override readonly name = 'LedgerError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status = 0,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The store failed or the API could not be reached: nothing was decided. */
  get unavailable(): boolean {
    return this.code === 'store_unavailable';
  }
}

/**
 * NotApplied marks an effect's failure as "certainly did not happen" (a
 * validation error, a provider's 4xx for an atomic request): the attempt is
 * recorded failed and may be retried. Any other error is recorded
 * ambiguous, because a timeout or a reset says nothing about whether the
 * provider acted.
 */
export class NotApplied extends Error {
  override readonly name = 'NotApplied';
  readonly replyonce = 'not_applied';
  constructor(message = 'not applied', options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** How an effect's error is recorded. */
export type ErrorClass = 'not_applied' | 'ambiguous';

/** The default classifier: NotApplied (or any error with replyonce: 'not_applied') did not happen; the rest is ambiguous. */
export function classifyError(err: unknown): ErrorClass {
  if (err instanceof NotApplied) return 'not_applied';
  if (typeof err === 'object' && err !== null && (err as { replyonce?: unknown }).replyonce === 'not_applied') {
    return 'not_applied';
  }
  return 'ambiguous';
}
