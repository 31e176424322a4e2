"""The requests of the ledger API, built once for the sync and the asyncio
client: each method returns the call and how to read its answer."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Optional

from .errors import LedgerError
from .types import CheckResult, Claim, ClaimRef, Entry, Key, Result, format_time, seconds

_MAX_ANSWER = 16 << 20


@dataclass
class Call:
    method: str
    path: str
    body: Optional[dict]
    read: Callable[[dict], Any]


def _drop_empty(d: dict) -> dict:
    return {k: v for k, v in d.items() if v not in (None, "", 0, False) or k in ("payload",)}


class Transport:
    """Sends one request with urllib and decodes a 200 answer."""

    def __init__(self, base_url: str, token: Optional[str], timeout: float) -> None:
        u = urllib.parse.urlparse(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"base_url {base_url!r} must be an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self.token = token or ""
        self.timeout = timeout

    def send(self, call: Call) -> Any:
        data = None
        headers = {"Accept": "application/json"}
        if call.body is not None:
            data = json.dumps(call.body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.base_url + call.path, data=data, method=call.method, headers=headers)
        where = f"ledger API {call.method} {call.path}"
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read(_MAX_ANSWER)
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read(_MAX_ANSWER)
        except (urllib.error.URLError, OSError) as e:
            raise LedgerError("store_unavailable", f"{where}: {e}") from e
        if status != 200:
            code, message = "", raw.decode("utf-8", "replace").strip()
            try:
                err = json.loads(raw)["error"]
                code, message = err.get("code", ""), err.get("message", message)
            except (ValueError, KeyError, TypeError):
                pass  # not the API's error shape: a proxy or a wrong URL
            if not code:
                code = "store_unavailable" if status >= 500 else f"http_{status}"
            raise LedgerError(code, f"{where}: {status} {code}: {message}", status)
        try:
            answer = json.loads(raw)
        except ValueError as e:
            raise LedgerError("store_unavailable", f"{where}: the answer is not JSON", status) from e
        return call.read(answer)


def _ctx_at(v: Any) -> Optional[str]:
    if v is None or v == "":
        return None
    if isinstance(v, datetime):
        return format_time(v)
    return str(v)


def begin(scope: str, run_id: Optional[str], mode: Optional[str], context_at: Any, lease_ttl: Any) -> Call:
    body = _drop_empty({"scope": scope, "run_id": run_id, "mode": mode, "context_at": _ctx_at(context_at),
                        "lease_ttl_ms": int(seconds(lease_ttl) * 1000)})
    return Call("POST", "/v1/runs", body, lambda w: w)


def claim(key: Key, run_id: Optional[str] = None, token: Optional[int] = None, summary: str = "",
          conflict: Optional[str] = None, ack: bool = False, pending_ttl: Any = None,
          redeliverable: bool = False, max_attempts: int = 0) -> Call:
    body = _drop_empty({"scope": key.scope, "intent": key.intent, "payload": key.payload, "run_id": run_id,
                        "token": token, "summary": summary, "conflict": conflict, "ack": ack,
                        "pending_ttl_ms": int(seconds(pending_ttl) * 1000), "redeliverable": redeliverable,
                        "max_attempts": max_attempts})
    return Call("POST", "/v1/claims", body, Claim.from_wire)


def settle(ref: ClaimRef, outcome: str, value: Any = None, error: str = "") -> Call:
    body: dict = {"scope": ref.scope, "entry_id": ref.entry_id, "attempt": ref.attempt, "outcome": outcome}
    if outcome == "committed" and value is not None:
        body["value"] = value
    if error:
        body["error"] = error

    def read(w: dict) -> Result:
        r = Result.from_wire(w)
        if error:
            r.error = error
        return r

    return Call("POST", "/v1/claims/settle", body, read)


def check(key: Key) -> Call:
    def read(w: dict) -> CheckResult:
        return CheckResult(done=w["done"], status=w.get("status", ""),
                           entry=Entry.from_wire(w["entry"]) if w.get("entry") else None)

    return Call("POST", "/v1/check", {"scope": key.scope, "intent": key.intent, "payload": key.payload}, read)


def history(scope: str) -> Call:
    if not scope:
        raise LedgerError("invalid_request", "history: scope is empty")
    return Call("GET", f"/v1/scopes/{urllib.parse.quote(scope, safe='')}/history", None,
                lambda w: [Entry.from_wire(e) for e in w["entries"]])


def heartbeat(scope: str, run_id: str, token: int) -> Call:
    return Call("POST", "/v1/runs/heartbeat", {"scope": scope, "run_id": run_id, "token": token}, lambda w: bool(w["alive"]))


def end(scope: str, run_id: str, reason: str = "", token: int = 0) -> Call:
    return Call("POST", "/v1/runs/end", _drop_empty({"scope": scope, "run_id": run_id, "token": token, "reason": reason}),
                lambda w: None)


def cancel(scope: str, run_id: str) -> Call:
    return Call("POST", "/v1/runs/cancel", {"scope": scope, "run_id": run_id}, lambda w: None)


def ambiguous(limit: int = 0) -> Call:
    path = "/v1/ambiguous" + (f"?limit={int(limit)}" if limit > 0 else "")
    return Call("GET", path, None, lambda w: [Entry.from_wire(e) for e in w["entries"]])


def resolve(key: Key, outcome: str) -> Call:
    return Call("POST", "/v1/entries/resolve",
                {"scope": key.scope, "intent": key.intent, "payload": key.payload, "outcome": outcome},
                lambda w: Entry.from_wire(w["entry"]))


def resolve_entry(scope: str, entry_id: str, outcome: str) -> Call:
    if not entry_id:
        raise LedgerError("invalid_request", "resolve_entry: entry id is empty")
    return Call("POST", "/v1/entries/resolve", {"scope": scope, "entry_id": entry_id, "outcome": outcome},
                lambda w: Entry.from_wire(w["entry"]))


def reconciled(ref: ClaimRef, outcome: str) -> Call:
    return Call("POST", "/v1/entries/resolve",
                {"scope": ref.scope, "entry_id": ref.entry_id, "attempt": ref.attempt, "by": "reconciler",
                 "outcome": outcome},
                lambda w: Entry.from_wire(w["entry"]))
