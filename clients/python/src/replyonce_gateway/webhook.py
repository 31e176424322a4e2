"""The gateway's forwards: verifying their Standard Webhooks signature and
reading the delivery from their Replyonce-* headers."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from .types import parse_time

__all__ = [
    "Delivery",
    "DeliveryError",
    "WebhookVerificationError",
    "header",
    "parse_covers",
    "parse_delivery",
    "sign_webhook",
    "verify_webhook",
]

#: Headers as a mapping (any case), an email.message.Message (http.server's
#: self.headers), or ASGI's list of (name, value) byte pairs.
Headers = Union[Mapping[str, Any], Iterable[tuple[bytes, bytes]], Any]


def header(headers: Headers, name: str) -> Optional[str]:
    """One header, case-insensitively; the first value of a repeated one."""
    want = name.lower()
    if isinstance(headers, (list, tuple)):
        for k, v in headers:
            k = k.decode("latin-1") if isinstance(k, bytes) else k
            if k.lower() == want:
                return v.decode("latin-1") if isinstance(v, bytes) else v
        return None
    get = getattr(headers, "get", None)
    if get is not None:
        v = get(name)
        if v is None:
            v = get(want)
        if v is not None:
            return v[0] if isinstance(v, (list, tuple)) else v
    if isinstance(headers, Mapping):
        for k, v in headers.items():
            if k.lower() == want:
                return v[0] if isinstance(v, (list, tuple)) else v
    return None


class WebhookVerificationError(Exception):
    """A forward whose signature or timestamp does not verify. The message
    is for logs, never for the sender."""


def _key(secret: str) -> bytes:
    b64 = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    try:
        key = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError('the signing secret is not base64 (want "whsec_...")') from e
    if not key:
        raise ValueError("the signing secret is empty")
    return key


def _mac(secret: str, msg_id: str, ts: str, body: bytes) -> bytes:
    return hmac.new(_key(secret), f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()


def verify_webhook(secret: str, headers: Headers, body: Union[bytes, str], *, tolerance: float = 300.0,
                   now: Callable[[], float] = time.time) -> None:
    """Check a forward's Standard Webhooks signature (webhook-id,
    webhook-timestamp, webhook-signature: HMAC-SHA256 over
    "id.timestamp.body" with the gateway's forward.signing_secret) on the raw
    body bytes, and that its timestamp is within tolerance seconds of this
    process's clock, either way. Raises WebhookVerificationError."""
    msg_id = header(headers, "webhook-id")
    ts = header(headers, "webhook-timestamp")
    sigs = header(headers, "webhook-signature")
    if not msg_id or not ts or not sigs:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    if not re.fullmatch(r"\d{1,12}", ts):
        raise WebhookVerificationError("webhook-timestamp is not a Unix time in seconds")
    age = now() - int(ts)
    if age > tolerance or age < -tolerance:
        raise WebhookVerificationError(f"webhook-timestamp is {round(age)} s away from now")
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    want = _mac(secret, msg_id, ts, raw)
    for part in sigs.split(" "):
        version, _, sig = part.partition(",")
        if version != "v1" or not sig:
            continue
        try:
            got = base64.b64decode(sig)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(got, want):
            return
    raise WebhookVerificationError("no webhook-signature matches")


def sign_webhook(secret: str, msg_id: str, timestamp: int, body: Union[bytes, str]) -> dict[str, str]:
    """The three Standard Webhooks headers, as the gateway makes them (for
    tests and tools)."""
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    sig = base64.b64encode(_mac(secret, msg_id, str(timestamp), raw)).decode()
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": "v1," + sig}


class DeliveryError(ValueError):
    """The request is not a gateway forward (its Replyonce headers are
    missing or malformed)."""


@dataclass
class Delivery:
    """One forwarded event, as the gateway's headers describe it."""

    scope: str  # the scope the run is fenced on
    run_id: str  # {source}:{event_id}, the same on every redelivery
    fencing_token: int  # writes carrying an older token are refused
    source: str = ""
    event_id: str = ""
    delivery: int = 0  # 1, 2, ...: a later delivery takes the run over
    context_at: Optional[datetime] = None  # when this view of the world was captured
    idempotency_key: str = ""  # stable for the event across deliveries and instances
    covers: int = 1  # how many events a debounced delivery stands for
    covered_ids: list[str] = field(default_factory=list)  # oldest first (at most the newest 100)
    notice: str = ""  # "cancel" for a notice that a newer message superseded the run


def parse_covers(v: str) -> tuple[int, list[str]]:
    """Read Replyonce-Covers: "N" or "N; ids=a,b,c" (each id query-escaped)."""
    head, sep, rest = v.partition(";")
    head = head.strip()
    if not head.isdigit() or int(head) < 1:
        raise DeliveryError(f"Replyonce-Covers {v!r}: the count is not a positive number")
    if not sep:
        return int(head), []
    rest = rest.strip()
    if not rest.startswith("ids="):
        raise DeliveryError(f'Replyonce-Covers {v!r}: want "ids=" after the count')
    return int(head), [urllib.parse.unquote_plus(i) for i in rest[4:].split(",")]


def parse_delivery(headers: Headers) -> Delivery:
    """Read a forward's Replyonce-* headers. Raises DeliveryError when the
    scope, run id or fencing token is missing or malformed."""
    scope = header(headers, "Replyonce-Scope") or ""
    run_id = header(headers, "Replyonce-Run-Id") or ""
    if not scope or not run_id:
        raise DeliveryError("missing Replyonce-Scope or Replyonce-Run-Id: is this from the gateway?")
    tok = header(headers, "Replyonce-Fencing-Token") or ""
    if not re.fullmatch(r"[1-9]\d{0,19}", tok):
        raise DeliveryError("missing or malformed Replyonce-Fencing-Token")
    ctx = header(headers, "Replyonce-Context-At")
    try:
        context_at = parse_time(ctx)
    except ValueError as e:
        raise DeliveryError(f"Replyonce-Context-At {ctx!r} is not RFC 3339") from e
    covers, ids = 1, []
    cv = header(headers, "Replyonce-Covers")
    if cv:
        covers, ids = parse_covers(cv)
    delivery = header(headers, "Replyonce-Delivery") or "0"
    return Delivery(scope=scope, run_id=run_id, fencing_token=int(tok), source=header(headers, "Replyonce-Source") or "",
                    event_id=header(headers, "Replyonce-Event-Id") or "",
                    delivery=int(delivery) if delivery.isdigit() else 0, context_at=context_at,
                    idempotency_key=header(headers, "Idempotency-Key") or "", covers=covers, covered_ids=ids,
                    notice=header(headers, "Replyonce-Notice") or "")
