"""The example agent in Python: the same agent as examples/agent in Go. It
takes the gateway's forwarded chat events and answers every customer message
exactly once, however often an event is delivered and whatever else the
customer writes meanwhile.

    python3 clients/python/examples/agent.py --signing-secret whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD

Flags: --listen (127.0.0.1:9000), --ledger (http://127.0.0.1:8081), --token
($GATEWAY_ADMIN_TOKEN), --signing-secret ($FORWARD_SIGNING_SECRET), --chat
(a chat API, or "builtin": a demo chat in this process that learns each
customer message from the signed event, for local trials), --budget (seconds
per event, 5; keep it below the gateway's forward timeout).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path

try:
    import replyonce_gateway  # noqa: F401
except ImportError:  # run from the repository without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from replyonce_gateway import (  # noqa: E402
    Delivery,
    ForwardAnswer,
    LedgerClient,
    LedgerError,
    NotApplied,
    forward_request_handler,
)

MAX_ROUNDS = 5
_print_lock = threading.Lock()


def log(msg: str, **fields) -> None:
    with _print_lock:
        print(json.dumps({"ts": datetime.now(timezone.utc).isoformat(), "msg": msg, **fields}), flush=True)


class DemoChat:
    """The built-in demo chat: in memory, for local trials only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._convs: dict[str, list[dict]] = {}
        self._seq = 0

    def customer_said(self, conversation: str, msg_id: str, text: str) -> bool:
        with self._lock:
            msgs = self._convs.setdefault(conversation, [])
            if any(m["id"] == msg_id for m in msgs):
                return False
            msgs.append({"id": msg_id, "from": "customer", "text": text})
            return True

    def conversation(self, conv_id: str) -> list[dict]:
        with self._lock:
            return [dict(m) for m in self._convs.get(conv_id, [])]

    def reply(self, conversation: str, answers: list[str], text: str, idempotency_key: str) -> str:
        with self._lock:
            self._seq += 1
            msg_id = f"r{self._seq}"
            self._convs.setdefault(conversation, []).append({"id": msg_id, "from": "agent", "text": text, "answers": answers})
        log("demo chat: reply received", conversation=conversation, answers=answers, text=text)
        return msg_id


class HTTPChat:
    """A chat over the fake provider's HTTP API (examples/agent/fakechat)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def conversation(self, conv_id: str) -> list[dict]:
        with urllib.request.urlopen(f"{self.base}/conversations/{urllib.parse.quote(conv_id, safe='')}", timeout=5) as r:
            return json.loads(r.read()).get("messages") or []

    def reply(self, conversation: str, answers: list[str], text: str, idempotency_key: str) -> str:
        req = urllib.request.Request(
            f"{self.base}/conversations/{urllib.parse.quote(conversation, safe='')}/replies",
            data=json.dumps({"answers": answers, "text": text}).encode(), method="POST",
            headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return json.loads(r.read())["id"]
        except urllib.error.HTTPError as e:
            if 400 <= e.code < 500:
                raise NotApplied(f"chat: post reply: status {e.code}") from e
            raise


def unanswered(msgs: list[dict]) -> list[str]:
    """The customer messages no agent reply answers yet, in order."""
    answered = {a for m in msgs for a in m.get("answers") or []}
    return [m["id"] for m in msgs if m.get("from") == "customer" and m["id"] not in answered]


def compose(msgs: list[dict], answers: list[str]) -> str:
    """The reply; a real agent would ask a model."""
    quoted = [json.dumps(m["text"], ensure_ascii=False) for m in msgs if m["id"] in answers]
    return "Thanks, we got " + " and ".join(quoted) + "; a person will follow up."


def handle(ledger: LedgerClient, chat, d: Delivery, conversation_id: str, budget: float) -> ForwardAnswer:
    """The work for one delivery, as the Go agent's Handle does it: take a
    handle on the run the gateway began (never begin it again: that would
    fence the gateway's own delivery), read the conversation, and send one
    reply for the unanswered messages through the ledger."""
    until = time.monotonic() + budget
    run = ledger.run_ref(d.scope, d.run_id, d.fencing_token)
    try:
        if not run.heartbeat():
            return ForwardAnswer(200, {"outcome": "run no longer writable (superseded, ended or cancelled): nothing for this delivery to do"})
    except LedgerError as e:
        if e.code == "unknown_run":
            return ForwardAnswer(400, {"outcome": "unknown run: not begun by the gateway"})
        return ForwardAnswer(503, {"outcome": f"ledger: {e}"})
    for _ in range(MAX_ROUNDS):
        msgs = chat.conversation(conversation_id)
        answers = unanswered(msgs)
        if not answers:
            return ForwardAnswer(200, {"outcome": "nothing to answer"})
        text = compose(msgs, answers)
        res = run.once("reply", {"answers": answers},
                       lambda ctx: {"message_id": chat.reply(conversation_id, answers, text, ctx.idempotency_key)},
                       summary=text,
                       # Replies conflict with replies: the gateway's own
                       # deliver records on the scope are not conversation content.
                       conflict="same-intent", wait=max(0.0, until - time.monotonic() - 0.1))
        if res.ok:
            try:
                run.end("answered")
            except LedgerError as e:
                log("could not end the run", error=str(e))
            covers = f" (one delivery for a burst of {d.covers} events)" if d.covers > 1 else ""
            return ForwardAnswer(200, {"outcome": f"{res.status} reply to {','.join(answers)}{covers}"})
        if res.status == "refused" and res.reason == "conversation_changed":
            # Another run's reply is pending or landed since this run's
            # context: let pending ones finish, then read again and decide again.
            pending = {e.id for e in res.conflicts if e.state == "pending"}
            while pending:
                if time.monotonic() > until:
                    return ForwardAnswer(503, {"outcome": "another run's reply is still pending"})
                time.sleep(0.05)
                still = {e.id for e in ledger.history(d.scope) if e.state == "pending"}
                pending &= still
            continue
        if res.status == "refused" and res.reason in ("superseded", "run_ended", "run_cancelled"):
            return ForwardAnswer(200, {"outcome": f"refused {res.reason}: not this delivery's to answer"})
        if res.status == "ambiguous":
            return ForwardAnswer(200, {"outcome": "reply outcome unknown; left for an operator"})
        if res.status == "refused" and res.reason == "exhausted":
            return ForwardAnswer(200, {"outcome": "reply failed too often; giving up"})
        # in_flight past the wait, or failed (known not sent): deliver again later.
        return ForwardAnswer(503, {"outcome": f"reply {res.status}"})
    return ForwardAnswer(503, {"outcome": "the conversation kept changing; try again later"})


def main() -> None:
    p = argparse.ArgumentParser(description="The example agent behind the replyonce gateway.")
    p.add_argument("--listen", default="127.0.0.1:9000")
    p.add_argument("--ledger", default="http://127.0.0.1:8081")
    p.add_argument("--token", default=os.environ.get("GATEWAY_ADMIN_TOKEN", ""))
    p.add_argument("--signing-secret", default=os.environ.get("FORWARD_SIGNING_SECRET", ""))
    p.add_argument("--chat", default="builtin")
    p.add_argument("--budget", type=float, default=5.0)
    args = p.parse_args()
    if not args.signing_secret:
        p.error("a signing secret is required (--signing-secret: the gateway's forward.signing_secret)")
    ledger = LedgerClient(args.ledger, args.token, timeout=10)
    demo = DemoChat() if args.chat == "builtin" else None
    chat = demo or HTTPChat(args.chat)

    def on_event(d: Delivery, body: bytes) -> ForwardAnswer:
        try:
            event = json.loads(body)
        except ValueError:
            event = {}
        if not isinstance(event, dict) or not event.get("conversation_id"):
            return ForwardAnswer(400, {"outcome": "body is not a chat event with a conversation_id"})
        if demo is not None and event.get("message_id") and demo.customer_said(event["conversation_id"], event["message_id"], event.get("text", "")):
            # The demo chat learns the customer message from the verified
            # event, as a real chat platform would already hold it.
            log("demo chat: customer message recorded from the event", conversation=event["conversation_id"],
                message_id=event["message_id"], text=event.get("text", ""))
        out = handle(ledger, chat, d, event["conversation_id"], args.budget)
        log("event handled", scope=d.scope, run_id=d.run_id, delivery=d.delivery, covers=d.covers, status=out.status, **out.body)
        return out

    def on_cancel(d: Delivery) -> ForwardAnswer:
        # forward.cancel: notify. The ledger refuses the superseded run's
        # reply anyway; a busier agent would stop its model call here.
        log("cancellation notice", scope=d.scope, run_id=d.run_id)
        return ForwardAnswer(204)

    handler = forward_request_handler(on_event, secret=args.signing_secret, on_cancel=on_cancel,
                                      on_refused=lambda status, reason: log("forwarded event refused", status=status, reason=reason))
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log("agent listening", listen=f"{server.server_address[0]}:{server.server_address[1]}", ledger=args.ledger,
        chat="builtin" if demo else args.chat)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
