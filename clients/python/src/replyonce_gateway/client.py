"""The ledger API client, synchronous: the shape of the Go client
(ledger/ledgerapi), named in Python's style. Every method is one HTTP call,
except once, which runs the effect here between a remote claim and a
remote settle."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional

from . import _calls
from .errors import LedgerError, classify_error as _default_classify
from .types import CheckResult, Claim, ClaimRef, EffectContext, Entry, Key, Result, parse_time, seconds

__all__ = ["LedgerClient", "Run"]

Effect = Callable[[EffectContext], Any]
Reconciler = Callable[[Entry], str]


class LedgerClient:
    """Speaks the gateway's ledger API. It never retries by itself: a claim
    whose answer was lost reads as in_flight on the next try, which only the
    caller can judge.

    base_url is the gateway's admin listener ("http://127.0.0.1:8081");
    token its admin.token. classify_error decides whether an effect's
    exception means ``not_applied`` or ``ambiguous`` (default: NotApplied
    only); reconcile, when set, is asked about an ambiguous effect by once
    and its answer (``committed``, ``not_applied`` or anything else for
    "unknown") recorded on the ledger."""

    def __init__(self, base_url: str, token: Optional[str] = None, *, timeout: float = 30.0,
                 classify_error: Callable[[BaseException], str] = _default_classify,
                 reconcile: Optional[Reconciler] = None, wait_interval: float = 0.05,
                 clock: Callable[[], float] = time.time) -> None:
        self._t = _calls.Transport(base_url, token, timeout)
        self.classify_error = classify_error
        self.reconcile = reconcile
        self.wait_interval = wait_interval
        self.clock = clock

    @property
    def base_url(self) -> str:
        return self._t.base_url

    def begin(self, scope: str, *, run_id: Optional[str] = None, mode: Optional[str] = None,
              context_at: Optional[datetime | str] = None, lease_ttl: Optional[timedelta | float] = None) -> "Run":
        """Start a run on scope, or resume it as a new delivery when run_id
        names an existing one."""
        w = self._t.send(_calls.begin(scope, run_id, mode, context_at, lease_ttl))
        return Run(self, w["scope"], w["run_id"], w["token"], mode=w.get("mode", ""), delivery=w.get("delivery", 0),
                   context_at=parse_time(w.get("context_at")), can_write=w["can_write"], reason=w.get("reason", ""))

    def run_ref(self, scope: str, run_id: str, token: int) -> "Run":
        """A handle on a run that began elsewhere, typically the gateway
        delivery whose Replyonce-Scope, Replyonce-Run-Id and
        Replyonce-Fencing-Token headers name it. It makes no call."""
        return Run(self, scope, run_id, token)

    def claim(self, key: Key, **options: Any) -> Claim:
        """Ask for the right to perform an effect (first phase). Options:
        run_id, token, summary, conflict, ack, pending_ttl, redeliverable,
        max_attempts."""
        return self._t.send(_calls.claim(key, **options))

    def settle(self, ref: ClaimRef, outcome: str, value: Any = None, error: str = "") -> Result:
        """Record the outcome of a claimed attempt (second phase):
        committed, not_applied or unknown."""
        return self._t.send(_calls.settle(ref, outcome, value, error))

    def reconciled(self, ref: ClaimRef, outcome: str) -> Entry:
        """Record what a reconciler found about the ambiguous attempt ref
        names; LedgerError not_ambiguous when it moved on meanwhile."""
        return self._t.send(_calls.reconciled(ref, outcome))

    def once(self, key: Key, effect: Effect, *, summary: str = "", conflict: Optional[str] = None,
             ack: bool = False, pending_ttl: Optional[timedelta | float] = None, redeliverable: bool = False,
             wait: Optional[timedelta | float] = None) -> Result:
        """Perform effect at most once for key, with no run fencing."""
        return self._run_effect(key, dict(summary=summary, conflict=conflict, ack=ack, pending_ttl=pending_ttl,
                                          redeliverable=redeliverable), effect, wait)

    def check(self, key: Key) -> CheckResult:
        """Was key's effect already done? Reads only."""
        return self._t.send(_calls.check(key))

    def history(self, scope: str) -> list[Entry]:
        """A scope's entries, oldest first."""
        return self._t.send(_calls.history(scope))

    def heartbeat(self, scope: str, run_id: str, token: int) -> bool:
        """Renew a run's lease by reference; False means stop."""
        return self._t.send(_calls.heartbeat(scope, run_id, token))

    def end(self, scope: str, run_id: str, reason: str = "") -> None:
        """Finish a run by reference (an operator's action: not fenced on a
        delivery)."""
        self._t.send(_calls.end(scope, run_id, reason))

    def cancel(self, scope: str, run_id: str) -> None:
        """Stop a run: its later claims are refused run_cancelled."""
        self._t.send(_calls.cancel(scope, run_id))

    def ambiguous(self, limit: int = 0) -> list[Entry]:
        """Entries whose outcome is unknown, from up to limit scopes (0: the
        server's default of 100)."""
        return self._t.send(_calls.ambiguous(limit))

    def resolve(self, key: Key, outcome: str) -> Entry:
        """Record what an operator found about an ambiguous effect."""
        return self._t.send(_calls.resolve(key, outcome))

    def resolve_entry(self, scope: str, entry_id: str, outcome: str) -> Entry:
        """resolve by scope and entry id, as ambiguous lists them."""
        return self._t.send(_calls.resolve_entry(scope, entry_id, outcome))

    # claim → effect → settle, as the Go ledger's RunEffect does it.
    def _run_effect(self, key: Key, claim_options: dict, effect: Effect, wait: Any) -> Result:
        wait_until = self.clock() + seconds(wait)
        reconciled = False
        while True:
            c = self.claim(key, **claim_options)
            if c.status == "claimed":
                return self._perform(key, c, effect)
            if c.status == "ambiguous" and c.entry is not None and self.reconcile is not None and not reconciled:
                reconciled = True
                again, res = self._reconcile(c)
                if not again:
                    return res
                continue
            if c.status == "in_flight" and seconds(wait) > 0 and self.clock() < wait_until:
                time.sleep(self.wait_interval)
                continue
            return c

    def _perform(self, key: Key, c: Claim, effect: Effect) -> Result:
        deadline = c.deadline or datetime.now(timezone.utc)
        ctx = EffectContext(key=key, entry_id=c.entry_id, attempt=c.attempt, idempotency_key=c.idempotency_key,
                            fencing_token=c.fencing_token, deadline=deadline, cancelled=threading.Event())
        timer = threading.Timer(max(0.0, deadline.timestamp() - self.clock()), ctx.cancelled.set)
        timer.daemon = True
        timer.start()
        value, failure = None, None
        try:
            value = effect(ctx)
        except Exception as e:  # an effect's failure is an outcome, not ours to raise
            failure = e
        finally:
            timer.cancel()
            timer.join()
        try:
            return _settle_outcome(self.settle, self.classify_error, c, value, failure)
        except LedgerError as e:
            raise _unrecorded(e) from e

    def _reconcile(self, c: Claim) -> tuple[bool, Result]:
        assert self.reconcile is not None and c.entry is not None
        try:
            outcome = self.reconcile(c.entry)
        except Exception:
            return False, c
        if outcome not in ("committed", "not_applied"):
            return False, c
        try:
            e = self.reconciled(ClaimRef(c.scope, c.entry.id, c.entry.attempt), outcome)
        except LedgerError as err:
            if err.code == "not_ambiguous":
                return True, c
            raise
        if outcome == "committed":
            return False, Result(status="replayed", value=e.value, entry=e)
        return True, c


def _unrecorded(e: LedgerError) -> LedgerError:
    return LedgerError(e.code, f"the effect ran but its outcome could not be recorded: {e}", e.status)


def _error_text(e: BaseException) -> str:
    return str(e) or type(e).__name__


def _settle_outcome(settle: Callable[..., Any], classify: Callable[[BaseException], str], c: Claim, value: Any,
                    failure: Optional[BaseException]) -> Any:
    """Settles what the effect came to: its value committed, a not-applied
    failure not_applied, any other failure unknown (ambiguous). Returns what
    settle returns (a Result, or an awaitable of one)."""
    if failure is None:
        return settle(c.ref, "committed", value)
    outcome = "not_applied" if classify(failure) == "not_applied" else "unknown"
    return settle(c.ref, outcome, None, _error_text(failure))


class Run:
    """A remote run: the fields of the Go client's Run, and its methods,
    each a call to the API. ``token`` is this delivery's fencing token:
    writes carrying an older one are refused."""

    def __init__(self, client: LedgerClient, scope: str, run_id: str, token: int, *, mode: str = "",
                 delivery: int = 0, context_at: Optional[datetime] = None, can_write: bool = True,
                 reason: str = "") -> None:
        self._c = client
        self.scope, self.id, self.token = scope, run_id, token
        self.mode, self.delivery, self.context_at = mode, delivery, context_at
        self.can_write, self.reason = can_write, reason

    def once(self, intent: str, payload: Any, effect: Effect, *, summary: str = "", conflict: Optional[str] = None,
             ack: bool = False, pending_ttl: Optional[timedelta | float] = None, wait: Optional[timedelta | float] = None) -> Result:
        """Perform a fenced effect at most once: refused when the run may no
        longer write or the scope changed under it."""
        return self._c._run_effect(Key(self.scope, intent, payload),
                                   dict(run_id=self.id, token=self.token, summary=summary, conflict=conflict, ack=ack,
                                        pending_ttl=pending_ttl), effect, wait)

    def claim(self, intent: str, payload: Any, **options: Any) -> Claim:
        """The first phase of once for this run."""
        return self._c.claim(Key(self.scope, intent, payload), run_id=self.id, token=self.token, **options)

    def check(self, intent: str, payload: Any) -> CheckResult:
        """Was this effect already done on the run's scope?"""
        return self._c.check(Key(self.scope, intent, payload))

    def heartbeat(self) -> bool:
        """Renew the lease; False means the run may no longer write."""
        return self._c.heartbeat(self.scope, self.id, self.token)

    def end(self, reason: str = "") -> None:
        """Finish the run, fenced on this delivery's token: a stale
        delivery's end changes nothing."""
        self._c._t.send(_calls.end(self.scope, self.id, reason, self.token))
