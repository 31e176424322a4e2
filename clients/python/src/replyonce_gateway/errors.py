"""Errors. Ledger outcomes are never exceptions (they are Results); these
are for what the ledger could not decide."""

from __future__ import annotations

__all__ = ["LedgerError", "NotApplied", "classify_error"]


class LedgerError(Exception):
    """A request the ledger did not decide: a non-2xx answer of the API
    (with its code and HTTP status), or no answer at all (status 0, code
    ``store_unavailable``). When ``unavailable`` is true nothing was decided
    and retrying later is safe. Match on ``code``, never on the message."""

    def __init__(self, code: str, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status

    @property
    def unavailable(self) -> bool:
        """The store failed or the API could not be reached."""
        return self.code == "store_unavailable"


class NotApplied(Exception):
    """Marks an effect's failure as "certainly did not happen" (a validation
    error, a provider's 4xx for an atomic request): the attempt is recorded
    failed and may be retried. Any other exception is recorded ambiguous,
    because a timeout or a reset says nothing about whether the provider
    acted."""

    replyonce = "not_applied"


def classify_error(err: BaseException) -> str:
    """The default classifier: NotApplied (or any exception with
    ``replyonce = "not_applied"``) is ``not_applied``; the rest is
    ``ambiguous``."""
    if isinstance(err, NotApplied) or getattr(err, "replyonce", None) == "not_applied":
        return "not_applied"
    return "ambiguous"
