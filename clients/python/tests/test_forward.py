"""A Python agent behind the real gateway: the gateway verifies the
provider's signature, forwards with its own Standard Webhooks signature and
the Replyonce headers, and the agent fences its reply on the run it was
handed."""

import json
import threading
import time
import unittest
import urllib.request
from http.server import ThreadingHTTPServer

from gateway import Gateway

from replyonce_gateway import ForwardAnswer, LedgerClient, forward_request_handler, sign_webhook

PROVIDER_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FORWARD_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"


def send(url, event_id, body):
    headers = {"Content-Type": "application/json", **sign_webhook(PROVIDER_SECRET, event_id, int(time.time()), body)}
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Forward(unittest.TestCase):
    def test_forward_answered_once_and_its_duplicate_never_delivered(self):
        seen, replies = [], []
        ledger = {}

        def handle(d, body):
            seen.append(d)
            event = json.loads(body)
            run = ledger["client"].run_ref(d.scope, d.run_id, d.fencing_token)
            r = run.once("reply", {"answers": [event["message_id"]]}, lambda ctx: replies.append(1) or {"message_id": "r1"},
                         conflict="same-intent")
            return ForwardAnswer(200 if r.ok else 503, {"outcome": r.status})

        agent = ThreadingHTTPServer(("127.0.0.1", 0), forward_request_handler(handle, secret=FORWARD_SECRET))
        t = threading.Thread(target=agent.serve_forever)
        t.start()
        gw = Gateway(f"""listen: 127.0.0.1:0
admin: {{listen: 127.0.0.1:0}}
store: {{kind: bolt, path: "{{dir}}/ledger.db"}}
log: {{level: info, format: json}}
sources:
  demo:
    provider: standard-webhooks
    secrets: [{PROVIDER_SECRET}]
    scope: "{{json:conversation_id}}"
    runs: supersede
    forward: {{url: "http://127.0.0.1:{agent.server_address[1]}/events", timeout: 5s, signing_secret: "{FORWARD_SECRET}", mode: inline}}
""")
        try:
            ledger["client"] = LedgerClient(gw.admin_url)
            body = json.dumps({"conversation_id": "c1", "message_id": "m1", "text": "Where is my order?"}).encode()
            status, answer = send(gw.public_url + "/hooks/demo", "evt_1", body)
            self.assertEqual((status, answer["status"]), (200, "delivered"))
            status, answer = send(gw.public_url + "/hooks/demo", "evt_1", body)
            self.assertEqual((status, answer["status"]), (200, "duplicate"))
            self.assertEqual(len(seen), 1, "the duplicate was not forwarded")
            self.assertEqual(replies, [1])
            d = seen[0]
            self.assertEqual((d.scope, d.source, d.event_id, d.run_id, d.delivery), ("c1", "demo", "evt_1", "demo:evt_1", 1))
            self.assertGreater(d.fencing_token, 0)
            self.assertIsNotNone(d.context_at)
            reply = [e for e in ledger["client"].history("c1") if e.intent == "reply"]
            self.assertEqual([(e.state, e.run_id) for e in reply], [("committed", "demo:evt_1")])
        finally:
            gw.stop()
            agent.shutdown()
            agent.server_close()
            t.join()


if __name__ == "__main__":
    unittest.main()
