import asyncio
import json
import threading
import time
import unittest
import urllib.request
from email.message import Message
from http.server import ThreadingHTTPServer

from gateway import REPO  # noqa: F401

from replyonce_gateway import (
    DeliveryError,
    ForwardAnswer,
    WebhookVerificationError,
    asgi_forward_app,
    forward_request_handler,
    parse_covers,
    parse_delivery,
    sign_webhook,
    verify_webhook,
)

SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
NOW = 1_772_366_400
BODY = b'{"conversation_id":"c1","message_id":"m1","text":"hi"}'


def forward(extra=None, body=BODY, ts=NOW):
    h = {**sign_webhook(SECRET, "msg_1", ts, body), "Replyonce-Source": "demo", "Replyonce-Event-Id": "evt_1",
         "Replyonce-Scope": "c1", "Replyonce-Run-Id": "demo:evt_1", "Replyonce-Delivery": "2",
         "Replyonce-Fencing-Token": "1772366400251", "Replyonce-Context-At": "2026-03-01T12:00:00.500Z",
         "Idempotency-Key": "demo:evt_1"}
    h.update(extra or {})
    return h


class Verify(unittest.TestCase):
    def test_signed_forward_verifies_and_tampering_does_not(self):
        verify_webhook(SECRET, forward(), BODY, now=lambda: NOW)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(SECRET, forward(), BODY + b" ", now=lambda: NOW)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", forward(), BODY, now=lambda: NOW)
        with self.assertRaisesRegex(WebhookVerificationError, "away from now"):
            verify_webhook(SECRET, forward(), BODY, now=lambda: NOW + 301)
        with self.assertRaisesRegex(WebhookVerificationError, "away from now"):
            verify_webhook(SECRET, forward(), BODY, now=lambda: NOW - 301)
        verify_webhook(SECRET, forward(), BODY, now=lambda: NOW + 290)
        h = forward()
        del h["webhook-signature"]
        with self.assertRaisesRegex(WebhookVerificationError, "missing"):
            verify_webhook(SECRET, h, BODY, now=lambda: NOW)
        several = forward()
        several["webhook-signature"] = "v1," + "A" * 44 + " " + several["webhook-signature"]
        verify_webhook(SECRET, several, BODY, now=lambda: NOW)

    def test_headers_in_every_shape(self):
        m = Message()
        for k, v in forward().items():
            m[k] = v
        asgi = [(k.lower().encode(), v.encode()) for k, v in forward().items()]
        lower = {k.lower(): v for k, v in forward().items()}
        for h in (m, asgi, lower, forward()):
            verify_webhook(SECRET, h, BODY, now=lambda: NOW)
            self.assertEqual(parse_delivery(h).run_id, "demo:evt_1")

    def test_delivery_from_the_headers(self):
        d = parse_delivery(forward({"Replyonce-Covers": "3; ids=evt_a,evt%2Cb,evt+c"}))
        self.assertEqual((d.scope, d.run_id, d.fencing_token, d.delivery), ("c1", "demo:evt_1", 1772366400251, 2))
        self.assertEqual((d.source, d.event_id, d.idempotency_key), ("demo", "evt_1", "demo:evt_1"))
        self.assertEqual(d.context_at.isoformat(), "2026-03-01T12:00:00.500000+00:00")
        self.assertEqual((d.covers, d.covered_ids), (3, ["evt_a", "evt,b", "evt c"]))
        self.assertEqual(d.notice, "")
        self.assertEqual(parse_delivery(forward({"Replyonce-Notice": "cancel"})).notice, "cancel")
        self.assertEqual(parse_covers("5"), (5, []))
        with self.assertRaises(DeliveryError):
            parse_covers("0")
        with self.assertRaisesRegex(DeliveryError, "Fencing-Token"):
            parse_delivery(forward({"Replyonce-Fencing-Token": "x"}))
        with self.assertRaisesRegex(DeliveryError, "Scope"):
            parse_delivery(forward({"Replyonce-Scope": ""}))


def post(url, headers, body):
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Handlers(unittest.TestCase):
    def test_http_server_handler(self):
        seen = []

        def handle(d, body):
            seen.append(d)
            self.assertEqual(body, BODY)
            return ForwardAnswer(200, {"outcome": "replied"})

        srv = ThreadingHTTPServer(("127.0.0.1", 0), forward_request_handler(handle, secret=SECRET))
        t = threading.Thread(target=srv.serve_forever)
        t.start()
        url = f"http://127.0.0.1:{srv.server_address[1]}/events"
        ts = int(time.time())
        try:
            status, body = post(url, forward(ts=ts), BODY)
            self.assertEqual((status, json.loads(body)), (200, {"outcome": "replied"}))
            self.assertEqual(post(url, forward(ts=ts), BODY + b"x")[0], 401)
            self.assertEqual(post(url, forward({"Replyonce-Notice": "cancel"}, ts=ts), BODY)[0], 204)
            self.assertEqual(post(url, forward({"Replyonce-Run-Id": ""}, ts=ts), BODY)[0], 400)
            self.assertEqual(len(seen), 1)
        finally:
            srv.shutdown()
            srv.server_close()
            t.join()

    def test_asgi_app(self):
        async def handle(d, body):
            if d.event_id == "boom":
                raise RuntimeError("boom")
            return ForwardAnswer(202, {"run": d.run_id})

        app = asgi_forward_app(handle, secret=SECRET)

        async def call(headers, body):
            sent = []
            chunks = [{"type": "http.request", "body": body[:10], "more_body": True},
                      {"type": "http.request", "body": body[10:], "more_body": False}]

            async def receive():
                return chunks.pop(0)

            async def send(msg):
                sent.append(msg)

            scope = {"type": "http", "method": "POST",
                     "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
            await app(scope, receive, send)
            return sent[0]["status"], sent[1]["body"]

        ts = int(time.time())
        status, body = asyncio.run(call(forward(ts=ts), BODY))
        self.assertEqual((status, json.loads(body)), (202, {"run": "demo:evt_1"}))
        self.assertEqual(asyncio.run(call(forward(ts=ts - 3600), BODY))[0], 401)
        self.assertEqual(asyncio.run(call(forward({"Replyonce-Event-Id": "boom"}, ts=ts), BODY))[0], 503)


if __name__ == "__main__":
    unittest.main()
