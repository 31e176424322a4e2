"""A webhook handler for the gateway's forwards, for Python's http.server and
for ASGI (Starlette, FastAPI, Django's ASGI, any ASGI server). Each verifies
the signature on the raw bytes, reads the delivery, and answers with the
status your handler returns, which tells the gateway what to do: 2xx done,
503 (or any 5xx) deliver again later, 400 never again."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Awaitable, Callable, Optional, Union

from .webhook import DeliveryError, Delivery, Headers, WebhookVerificationError, parse_delivery, verify_webhook

__all__ = ["ForwardAnswer", "handle_forward", "ahandle_forward", "forward_request_handler", "asgi_forward_app"]


@dataclass
class ForwardAnswer:
    """What your handler answers the gateway; body is sent as JSON when set."""

    status: int
    body: Any = None


Handler = Callable[[Delivery, bytes], Union[ForwardAnswer, Awaitable[ForwardAnswer]]]
MAX_BODY = 1 << 20


def _precheck(headers: Headers, body: bytes, secret: Optional[str], allow_unsigned: bool, tolerance: float,
              on_refused: Optional[Callable[[int, str], None]]) -> Union[Delivery, ForwardAnswer]:
    def refuse(status: int, reason: str) -> ForwardAnswer:
        if on_refused:
            on_refused(status, reason)
        return ForwardAnswer(status, {"error": "signature verification failed" if status == 401 else reason})

    if not secret and not allow_unsigned:
        raise ValueError("a secret is required (the gateway's forward.signing_secret)")
    if secret:
        try:
            verify_webhook(secret, headers, body, tolerance=tolerance)
        except WebhookVerificationError as e:
            return refuse(401, str(e))
    try:
        return parse_delivery(headers)
    except DeliveryError as e:
        return refuse(400, str(e))


def handle_forward(handler: Handler, headers: Headers, body: bytes, *, secret: Optional[str] = None,
                   allow_unsigned: bool = False, tolerance: float = 300.0,
                   on_cancel: Optional[Callable[[Delivery], ForwardAnswer]] = None,
                   on_refused: Optional[Callable[[int, str], None]] = None) -> ForwardAnswer:
    """The framework-free core: verify, parse, then call handler. A bad
    signature is 401, a request that is not a gateway forward 400, a
    cancellation notice 204 (or on_cancel's answer), a handler that raises
    503 (the gateway delivers again later)."""
    pre = _precheck(headers, body, secret, allow_unsigned, tolerance, on_refused)
    if isinstance(pre, ForwardAnswer):
        return pre
    try:
        if pre.notice == "cancel":
            return on_cancel(pre) if on_cancel else ForwardAnswer(204)
        return handler(pre, body)  # type: ignore[return-value]
    except Exception as e:
        if on_refused:
            on_refused(503, f"handler failed: {e}")
        return ForwardAnswer(503, {"error": f"handler failed: {e}"})


async def ahandle_forward(handler: Handler, headers: Headers, body: bytes, *, secret: Optional[str] = None,
                          allow_unsigned: bool = False, tolerance: float = 300.0,
                          on_cancel: Optional[Callable[[Delivery], Any]] = None,
                          on_refused: Optional[Callable[[int, str], None]] = None) -> ForwardAnswer:
    """handle_forward for coroutine handlers (plain ones work too)."""
    pre = _precheck(headers, body, secret, allow_unsigned, tolerance, on_refused)
    if isinstance(pre, ForwardAnswer):
        return pre
    try:
        if pre.notice == "cancel":
            if not on_cancel:
                return ForwardAnswer(204)
            a = on_cancel(pre)
        else:
            a = handler(pre, body)
        return await a if inspect.isawaitable(a) else a
    except Exception as e:
        if on_refused:
            on_refused(503, f"handler failed: {e}")
        return ForwardAnswer(503, {"error": f"handler failed: {e}"})


def forward_request_handler(handler: Handler, *, secret: Optional[str] = None, allow_unsigned: bool = False,
                            tolerance: float = 300.0, max_body: int = MAX_BODY,
                            on_cancel: Optional[Callable[[Delivery], ForwardAnswer]] = None,
                            on_refused: Optional[Callable[[int, str], None]] = None) -> type:
    """A BaseHTTPRequestHandler class for http.server that answers the
    gateway's forwards with handler (a plain function)."""

    class ForwardRequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, a: ForwardAnswer) -> None:
            payload = b"" if a.body is None else json.dumps(a.body).encode()
            self.send_response(a.status)
            if a.body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self._answer(ForwardAnswer(411, {"error": "Content-Length required"}))
                return
            if int(length) > max_body:
                self.close_connection = True
                self._answer(ForwardAnswer(413, {"error": "body too large"}))
                return
            body = self.rfile.read(int(length))
            self._answer(handle_forward(handler, self.headers, body, secret=secret, allow_unsigned=allow_unsigned,
                                        tolerance=tolerance, on_cancel=on_cancel, on_refused=on_refused))

        def do_GET(self) -> None:  # noqa: N802
            self._answer(ForwardAnswer(405, {"error": "POST only"}))

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # the handler's own logging says what matters

    return ForwardRequestHandler


def asgi_forward_app(handler: Handler, *, secret: Optional[str] = None, allow_unsigned: bool = False,
                     tolerance: float = 300.0, max_body: int = MAX_BODY,
                     on_cancel: Optional[Callable[[Delivery], Any]] = None,
                     on_refused: Optional[Callable[[int, str], None]] = None) -> Callable[..., Awaitable[None]]:
    """An ASGI application that answers the gateway's forwards with handler
    (a coroutine function or a plain one). Mount it at forward.url's path."""

    async def app(scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            a = ForwardAnswer(405, {"error": "POST only"})
        else:
            chunks, size, too_large = [], 0, False
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                chunk = msg.get("body", b"")
                size += len(chunk)
                if size > max_body:
                    too_large = True
                else:
                    chunks.append(chunk)
                if not msg.get("more_body"):
                    break
            if too_large:
                a = ForwardAnswer(413, {"error": "body too large"})
            else:
                a = await ahandle_forward(handler, scope["headers"], b"".join(chunks), secret=secret,
                                          allow_unsigned=allow_unsigned, tolerance=tolerance, on_cancel=on_cancel,
                                          on_refused=on_refused)
        payload = b"" if a.body is None else json.dumps(a.body).encode()
        headers = [(b"content-length", str(len(payload)).encode())]
        if a.body is not None:
            headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": a.status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    return app
