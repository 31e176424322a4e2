"""The ledger API client for asyncio: the same methods as LedgerClient, as
coroutines. Requests run on the default executor (urllib in a thread), so
the package stays within the standard library; an async effect runs on the
event loop and is cancelled at its claim's deadline."""

from __future__ import annotations

import asyncio
import inspect
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, Optional, Union

from . import _calls
from .client import _error_text, _unrecorded
from .errors import LedgerError, classify_error as _default_classify
from .types import CheckResult, Claim, ClaimRef, EffectContext, Entry, Key, Result, parse_time, seconds

__all__ = ["AsyncLedgerClient", "AsyncRun"]

AsyncEffect = Callable[[EffectContext], Union[Awaitable[Any], Any]]
AsyncReconciler = Callable[[Entry], Union[Awaitable[str], str]]


async def _maybe_await(v: Any) -> Any:
    if inspect.isawaitable(v):
        return await v
    return v


class AsyncLedgerClient:
    """LedgerClient for asyncio. See LedgerClient for the options; effects
    and the reconciler may be coroutine functions or plain ones."""

    def __init__(self, base_url: str, token: Optional[str] = None, *, timeout: float = 30.0,
                 classify_error: Callable[[BaseException], str] = _default_classify,
                 reconcile: Optional[AsyncReconciler] = None, wait_interval: float = 0.05,
                 clock: Callable[[], float] = time.time) -> None:
        self._t = _calls.Transport(base_url, token, timeout)
        self.classify_error = classify_error
        self.reconcile = reconcile
        self.wait_interval = wait_interval
        self.clock = clock

    @property
    def base_url(self) -> str:
        return self._t.base_url

    async def _send(self, call: _calls.Call) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, self._t.send, call)

    async def begin(self, scope: str, *, run_id: Optional[str] = None, mode: Optional[str] = None,
                    context_at: Optional[datetime | str] = None, lease_ttl: Optional[timedelta | float] = None) -> "AsyncRun":
        w = await self._send(_calls.begin(scope, run_id, mode, context_at, lease_ttl))
        return AsyncRun(self, w["scope"], w["run_id"], w["token"], mode=w.get("mode", ""), delivery=w.get("delivery", 0),
                        context_at=parse_time(w.get("context_at")), can_write=w["can_write"], reason=w.get("reason", ""))

    def run_ref(self, scope: str, run_id: str, token: int) -> "AsyncRun":
        return AsyncRun(self, scope, run_id, token)

    async def claim(self, key: Key, **options: Any) -> Claim:
        return await self._send(_calls.claim(key, **options))

    async def settle(self, ref: ClaimRef, outcome: str, value: Any = None, error: str = "") -> Result:
        return await self._send(_calls.settle(ref, outcome, value, error))

    async def reconciled(self, ref: ClaimRef, outcome: str) -> Entry:
        return await self._send(_calls.reconciled(ref, outcome))

    async def once(self, key: Key, effect: AsyncEffect, *, summary: str = "", conflict: Optional[str] = None,
                   ack: bool = False, pending_ttl: Optional[timedelta | float] = None, redeliverable: bool = False,
                   wait: Optional[timedelta | float] = None) -> Result:
        return await self._run_effect(key, dict(summary=summary, conflict=conflict, ack=ack, pending_ttl=pending_ttl,
                                                redeliverable=redeliverable), effect, wait)

    async def check(self, key: Key) -> CheckResult:
        return await self._send(_calls.check(key))

    async def history(self, scope: str) -> list[Entry]:
        return await self._send(_calls.history(scope))

    async def heartbeat(self, scope: str, run_id: str, token: int) -> bool:
        return await self._send(_calls.heartbeat(scope, run_id, token))

    async def end(self, scope: str, run_id: str, reason: str = "") -> None:
        await self._send(_calls.end(scope, run_id, reason))

    async def cancel(self, scope: str, run_id: str) -> None:
        await self._send(_calls.cancel(scope, run_id))

    async def ambiguous(self, limit: int = 0) -> list[Entry]:
        return await self._send(_calls.ambiguous(limit))

    async def resolve(self, key: Key, outcome: str) -> Entry:
        return await self._send(_calls.resolve(key, outcome))

    async def resolve_entry(self, scope: str, entry_id: str, outcome: str) -> Entry:
        return await self._send(_calls.resolve_entry(scope, entry_id, outcome))

    async def _run_effect(self, key: Key, claim_options: dict, effect: AsyncEffect, wait: Any) -> Result:
        wait_until = self.clock() + seconds(wait)
        reconciled = False
        while True:
            c = await self.claim(key, **claim_options)
            if c.status == "claimed":
                return await self._perform(key, c, effect)
            if c.status == "ambiguous" and c.entry is not None and self.reconcile is not None and not reconciled:
                reconciled = True
                again, res = await self._reconcile(c)
                if not again:
                    return res
                continue
            if c.status == "in_flight" and seconds(wait) > 0 and self.clock() < wait_until:
                await asyncio.sleep(self.wait_interval)
                continue
            return c

    async def _perform(self, key: Key, c: Claim, effect: AsyncEffect) -> Result:
        deadline = c.deadline or datetime.now(timezone.utc)
        ctx = EffectContext(key=key, entry_id=c.entry_id, attempt=c.attempt, idempotency_key=c.idempotency_key,
                            fencing_token=c.fencing_token, deadline=deadline)
        value, failure = None, None
        try:
            value = await asyncio.wait_for(_maybe_await(effect(ctx)), timeout=max(0.0, deadline.timestamp() - self.clock()))
        except asyncio.TimeoutError as e:
            ctx.cancelled.set()
            failure = TimeoutError("the effect did not finish by its claim's deadline")
            failure.__cause__ = e
        except Exception as e:  # an effect's failure is an outcome, not ours to raise
            failure = e
        try:
            if failure is None:
                return await self.settle(c.ref, "committed", value)
            outcome = "not_applied" if self.classify_error(failure) == "not_applied" else "unknown"
            return await self.settle(c.ref, outcome, None, _error_text(failure))
        except LedgerError as e:
            raise _unrecorded(e) from e

    async def _reconcile(self, c: Claim) -> tuple[bool, Result]:
        assert self.reconcile is not None and c.entry is not None
        try:
            outcome = await _maybe_await(self.reconcile(c.entry))
        except Exception:
            return False, c
        if outcome not in ("committed", "not_applied"):
            return False, c
        try:
            e = await self.reconciled(ClaimRef(c.scope, c.entry.id, c.entry.attempt), outcome)
        except LedgerError as err:
            if err.code == "not_ambiguous":
                return True, c
            raise
        if outcome == "committed":
            return False, Result(status="replayed", value=e.value, entry=e)
        return True, c


class AsyncRun:
    """Run for asyncio."""

    def __init__(self, client: AsyncLedgerClient, scope: str, run_id: str, token: int, *, mode: str = "",
                 delivery: int = 0, context_at: Optional[datetime] = None, can_write: bool = True,
                 reason: str = "") -> None:
        self._c = client
        self.scope, self.id, self.token = scope, run_id, token
        self.mode, self.delivery, self.context_at = mode, delivery, context_at
        self.can_write, self.reason = can_write, reason

    async def once(self, intent: str, payload: Any, effect: AsyncEffect, *, summary: str = "",
                   conflict: Optional[str] = None, ack: bool = False, pending_ttl: Optional[timedelta | float] = None,
                   wait: Optional[timedelta | float] = None) -> Result:
        return await self._c._run_effect(Key(self.scope, intent, payload),
                                         dict(run_id=self.id, token=self.token, summary=summary, conflict=conflict,
                                              ack=ack, pending_ttl=pending_ttl), effect, wait)

    async def claim(self, intent: str, payload: Any, **options: Any) -> Claim:
        return await self._c.claim(Key(self.scope, intent, payload), run_id=self.id, token=self.token, **options)

    async def check(self, intent: str, payload: Any) -> CheckResult:
        return await self._c.check(Key(self.scope, intent, payload))

    async def heartbeat(self) -> bool:
        return await self._c.heartbeat(self.scope, self.id, self.token)

    async def end(self, reason: str = "") -> None:
        await self._c._send(_calls.end(self.scope, self.id, reason, self.token))
