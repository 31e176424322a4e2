"""Effect keys, computed as the gateway's ledger computes them (ledger/key.go
in the repository), so that a Python, TypeScript and Go worker name one
effect by one entry id."""

from __future__ import annotations

import decimal
import hashlib
import json
import math
import re
from typing import Any

__all__ = ["canonicalize", "entry_id", "idempotency_key"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _well_formed(s: str) -> str:
    # The gateway reads JSON with Go, which turns a lone surrogate into
    # U+FFFD; json.loads keeps it as a lone code point. A valid pair was
    # already joined into one code point by json.loads.
    return _SURROGATE.sub("\ufffd", s)


def _number(x: float) -> str:
    """The ECMAScript rendering of the double x (RFC 8785, section 3.2.2.3)."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"canonicalize: {x!r} is not a JSON number")
    if x == 0:
        return "0"
    r = repr(x)  # the shortest digits that round-trip, as ECMAScript picks them
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    mantissa, _, exp = r.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + out


def _write(v: Any, depth: int) -> str:
    if depth > 1000:
        raise ValueError("canonicalize: the value nests too deep (or contains itself)")
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        try:
            # Like every number, an integer is the nearest double (the Go
            # ledger reads numbers the same way).
            return _number(float(v))
        except OverflowError as e:
            raise ValueError(f"canonicalize: {v} is too large for a JSON number") from e
    if isinstance(v, (float, decimal.Decimal)):
        return _number(float(v))
    if isinstance(v, str):
        return json.dumps(_well_formed(v), ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_write(e, depth + 1) for e in v) + "]"
    if isinstance(v, dict):
        fields: dict[str, str] = {}
        for k, val in v.items():
            if not isinstance(k, str):
                raise TypeError(f"canonicalize: object key {k!r} is not a string")
            fields[_well_formed(k)] = _write(val, depth + 1)
        # RFC 8785 orders keys by their UTF-16 code units; big-endian
        # UTF-16 bytes compare in that order.
        keys = sorted(fields, key=lambda s: s.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + fields[k] for k in keys) + "}"
    raise TypeError(f"canonicalize: {type(v).__name__} is not JSON")


def canonicalize(value: Any) -> str:
    """Render value in the JSON Canonicalization Scheme (RFC 8785): keys
    sorted by UTF-16 code units, no whitespace, strings escaped only where
    JSON requires it, numbers as ECMAScript writes the double they denote
    (so 2500, 2500.0 and 2.5e3 are one value). NaN and infinities raise
    ValueError; values that are not JSON raise TypeError."""
    try:
        return _write(value, 0)
    except RecursionError as e:
        raise ValueError("canonicalize: the value nests too deep (or contains itself)") from e


_DOMAIN = b"replyonce/entry/v2"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def entry_id(scope: str, intent: str, payload: Any = None) -> str:
    """The ledger's id of the effect (scope, intent, payload): the first 16
    bytes of SHA-256 over a domain tag and the three fields, each after its
    length, in hex. A missing payload is JSON null."""
    h = hashlib.sha256(_DOMAIN)
    for field in (scope, intent, canonicalize(payload)):
        b = _well_formed(field).encode("utf-8")
        h.update(_uvarint(len(b)))
        h.update(b)
    return h.hexdigest()[:32]


def idempotency_key(scope: str, intent: str, payload: Any = None) -> str:
    """The key the ledger gives the effect for providers that accept one:
    the same for every attempt, worker, process and language."""
    return "ro_" + entry_id(scope, intent, payload)
