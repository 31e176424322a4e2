"""The ledger's values as the clients hand them out: the API's fields, times
as aware datetimes in UTC, durations in seconds."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

__all__ = [
    "Key",
    "Entry",
    "Result",
    "Claim",
    "ClaimRef",
    "CheckResult",
    "EffectContext",
    "parse_time",
    "format_time",
]

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(s: Optional[str]) -> Optional[datetime]:
    """Reads an RFC 3339 time as the API writes it (up to nanoseconds, Z)."""
    if not s:
        return None
    t = s.replace("Z", "+00:00").replace("z", "+00:00")
    # Python 3.10's fromisoformat takes only 3 or 6 fractional digits.
    t = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], t, count=1)
    return datetime.fromisoformat(t).astimezone(timezone.utc)


def format_time(t: datetime) -> str:
    """Writes an aware datetime as RFC 3339 in UTC with milliseconds."""
    if t.tzinfo is None:
        raise ValueError("a naive datetime is ambiguous: give it a timezone")
    u = t.astimezone(timezone.utc)
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Key:
    """Names one effect: what (intent) is done to which business object
    (payload) in which scope. A missing payload is JSON null."""

    scope: str
    intent: str
    payload: Any = None


@dataclass
class Entry:
    """One effect in a scope's ledger. ``idempotency_key`` is stable across
    attempts, workers and languages: pass it to providers that accept one."""

    id: str
    scope: str
    intent: str
    state: str  # pending | committed | failed | ambiguous
    attempt: int
    idempotency_key: str
    payload: Any = None
    summary: str = ""
    failures: int = 0
    max_attempts: int = 0
    run_id: str = ""
    token: int = 0
    delivery: int = 0
    claimed_at: Optional[datetime] = None
    pending_ttl: float = 0.0
    deadline: Optional[datetime] = None
    redeliverable: bool = False
    settled_at: Optional[datetime] = None
    landed_seq: int = 0
    value: Any = None
    error: str = ""
    abandoned: bool = False
    late_settle: bool = False
    resolved_by: str = ""

    @classmethod
    def from_wire(cls, w: dict) -> "Entry":
        return cls(
            id=w["id"],
            scope=w["scope"],
            intent=w["intent"],
            state=w["state"],
            attempt=w.get("attempt", 0),
            idempotency_key=w.get("idempotency_key", ""),
            payload=w.get("payload"),
            summary=w.get("summary", ""),
            failures=w.get("failures", 0),
            max_attempts=w.get("max_attempts", 0),
            run_id=w.get("run_id", ""),
            token=w.get("token", 0),
            delivery=w.get("delivery", 0),
            claimed_at=parse_time(w.get("claimed_at")),
            pending_ttl=w.get("pending_ttl_ms", 0) / 1000.0,
            deadline=parse_time(w.get("deadline")),
            redeliverable=w.get("redeliverable", False),
            settled_at=parse_time(w.get("settled_at")),
            landed_seq=w.get("landed_seq", 0),
            value=w.get("value"),
            error=w.get("error", ""),
            abandoned=w.get("abandoned", False),
            late_settle=w.get("late_settle", False),
            resolved_by=w.get("resolved_by", ""),
        )


@dataclass
class Result:
    """A ledger result. Ledger outcomes are values, never exceptions: only a
    store or network failure (or invalid input) raises LedgerError.

    status is executed, replayed, in_flight, ambiguous, failed or refused
    (with reason: superseded, run_cancelled, run_ended, busy,
    conversation_changed, exhausted, rate_limited)."""

    status: str
    reason: str = ""
    value: Any = None
    error: str = ""
    late_settle: bool = False
    entry: Optional[Entry] = None
    conflicts: list[Entry] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The effect is known to have happened (executed or replayed)."""
        return self.status in ("executed", "replayed")

    @classmethod
    def from_wire(cls, w: dict) -> "Result":
        return cls(
            status=w["status"],
            reason=w.get("reason", ""),
            value=w.get("value"),
            error=w.get("error", ""),
            late_settle=w.get("late_settle", False),
            entry=Entry.from_wire(w["entry"]) if w.get("entry") else None,
            conflicts=[Entry.from_wire(c) for c in w.get("conflicts") or []],
        )


@dataclass
class Claim(Result):
    """A claim's answer. When status is ``claimed`` you own the attempt and
    must settle it before ``deadline``."""

    scope: str = ""
    entry_id: str = ""
    attempt: int = 0
    idempotency_key: str = ""
    fencing_token: int = 0
    deadline: Optional[datetime] = None

    @classmethod
    def from_wire(cls, w: dict) -> "Claim":
        r = Result.from_wire(w)
        return cls(
            status=r.status,
            reason=r.reason,
            value=r.value,
            error=r.error,
            late_settle=r.late_settle,
            entry=r.entry,
            conflicts=r.conflicts,
            scope=w.get("scope", ""),
            entry_id=w.get("entry_id", ""),
            attempt=w.get("attempt", 0),
            idempotency_key=w.get("idempotency_key", ""),
            fencing_token=w.get("fencing_token", 0),
            deadline=parse_time(w.get("deadline")),
        )

    @property
    def ref(self) -> "ClaimRef":
        return ClaimRef(self.scope, self.entry_id, self.attempt)


@dataclass(frozen=True)
class ClaimRef:
    """Names a claimed attempt, for settle and reconciled."""

    scope: str
    entry_id: str
    attempt: int


@dataclass
class CheckResult:
    """Was an effect already done? status is replayed (done), in_flight,
    ambiguous, failed, or empty when never claimed."""

    done: bool
    status: str = ""
    entry: Optional[Entry] = None


@dataclass
class EffectContext:
    """What an effect learns about its attempt. Pass ``idempotency_key`` to
    providers that accept one, and stop by ``deadline``: past it the claim
    reads as abandoned. ``cancelled`` is set at the deadline (a sync effect
    can wait on it or poll it; an async effect is also cancelled then)."""

    key: Key
    entry_id: str
    attempt: int
    idempotency_key: str
    fencing_token: int
    deadline: datetime
    cancelled: threading.Event = field(default_factory=threading.Event)

    def remaining(self) -> float:
        """Seconds left before the deadline (0 when past it): a timeout to
        give the provider call."""
        return max(0.0, (self.deadline - datetime.now(timezone.utc)).total_seconds())


def seconds(d: Optional[timedelta | float | int]) -> float:
    if d is None:
        return 0.0
    if isinstance(d, timedelta):
        return d.total_seconds()
    return float(d)
