"""The sync client against the real gateway binary's ledger API: the seed's
races, the error-to-outcome mapping of the Go loop, and the calls around
them."""

import itertools
import os
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

from gateway import Gateway, ledger_config

from replyonce_gateway import Key, LedgerClient, LedgerError, NotApplied, entry_id

TOKEN = "py-suite-token-0123456789"
_n = itertools.count()


def fresh(name):
    return f"py-{name}-{os.getpid()}-{next(_n)}"


class LedgerSuite(unittest.TestCase):
    gw: Gateway
    client: LedgerClient

    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(ledger_config(TOKEN))
        cls.client = LedgerClient(cls.gw.admin_url, TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def test_three_concurrent_onces_then_a_late_retry(self):
        scope = fresh("order")
        refunds = []
        lock = threading.Lock()

        def effect(ctx):
            with lock:
                refunds.append(ctx.idempotency_key)
            time.sleep(0.05)
            return {"refund_id": "re_1"}

        key = Key(scope, "refund", {"order": "A-1001", "cents": 2500})
        start = threading.Barrier(3)

        def refund():
            start.wait()
            return self.client.once(key, effect)

        with ThreadPoolExecutor(3) as pool:
            raced = list(pool.map(lambda _: refund(), range(3)))
        late = self.client.once(key, effect)
        self.assertEqual(sorted(r.status for r in raced), ["executed", "in_flight", "in_flight"])
        self.assertEqual(late.status, "replayed")
        self.assertTrue(late.ok)
        self.assertEqual(late.value, {"refund_id": "re_1"})
        eid = entry_id(scope, "refund", {"cents": 2500, "order": "A-1001"})
        self.assertEqual(late.entry.id, eid, "the gateway names the effect as the client does")
        self.assertEqual(refunds, ["ro_" + eid])

    def test_superseded_run_is_refused(self):
        scope = fresh("conv")
        now = datetime.now(timezone.utc)
        old = self.client.begin(scope, run_id="m1", mode="supersede", context_at=now - timedelta(seconds=2))
        newer = self.client.begin(scope, run_id="m2", mode="supersede", context_at=now - timedelta(seconds=1))
        self.assertGreater(newer.token, old.token)
        sent = []
        r = old.once("tag", "billing", lambda ctx: sent.append(1))
        self.assertEqual((r.status, r.reason), ("refused", "superseded"))
        self.assertEqual(sent, [])
        self.assertFalse(old.heartbeat())
        self.assertTrue(newer.heartbeat())
        again = self.client.begin(scope, run_id="m2", mode="supersede")
        self.assertEqual(again.delivery, 2)
        self.assertEqual(newer.once("tag", "vip", lambda ctx: sent.append(1)).reason, "superseded")
        self.assertEqual(again.once("tag", "vip", lambda ctx: sent.append(1)).status, "executed")
        self.assertEqual(sent, [1])

    def test_conversation_changed_then_through_after_reread(self):
        scope = fresh("conv")
        r1 = self.client.begin(scope, run_id="m1", context_at=datetime.now(timezone.utc) - timedelta(seconds=1))
        started, hold = threading.Event(), threading.Event()

        def slow(ctx):
            started.set()
            hold.wait(10)
            return {"message_id": "r1"}

        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(r1.once, "reply", {"answers": ["m1"]}, slow, summary="Thanks, we got m1", conflict="same-intent")
            started.wait(10)
            r2 = self.client.begin(scope, run_id="m2")
            changed = r2.once("reply", {"answers": ["m1", "m2"]}, lambda ctx: self.fail("must not run"), conflict="same-intent")
            self.assertEqual((changed.status, changed.reason), ("refused", "conversation_changed"))
            self.assertEqual([(c.summary, c.state) for c in changed.conflicts], [("Thanks, we got m1", "pending")])
            hold.set()
            self.assertEqual(first.result().status, "executed")
        second = r2.once("reply", {"answers": ["m2"]}, lambda ctx: {"message_id": "r2"}, conflict="same-intent")
        self.assertEqual(second.status, "executed")
        self.assertEqual([e.state for e in self.client.history(scope) if e.intent == "reply"], ["committed", "committed"])

    def test_errors_map_to_outcomes_as_the_go_loop_maps_them(self):
        scope = fresh("errors")

        def declined(ctx):
            raise NotApplied("card declined")

        failed = self.client.once(Key(scope, "charge", 1), declined)
        self.assertEqual((failed.status, failed.error), ("failed", "card declined"))
        self.assertEqual(self.client.once(Key(scope, "charge", 1), lambda ctx: "ok").status, "executed")

        def reset(ctx):
            raise ConnectionResetError("socket hang up")

        self.assertEqual(self.client.once(Key(scope, "refund", 2), reset).status, "ambiguous")
        again = self.client.once(Key(scope, "refund", 2), lambda ctx: self.fail("an unknown outcome is never retried blindly"))
        self.assertEqual(again.status, "ambiguous")
        check = self.client.check(Key(scope, "refund", 2))
        self.assertEqual((check.done, check.status), (False, "ambiguous"))
        listed = [e for e in self.client.ambiguous(1000) if e.scope == scope]
        self.assertEqual(len(listed), 1)
        self.assertEqual(self.client.resolve_entry(scope, listed[0].id, "committed").state, "committed")
        self.assertTrue(self.client.check(Key(scope, "refund", 2)).done)
        lenient = LedgerClient(self.gw.admin_url, TOKEN, classify_error=lambda e: "not_applied" if str(e) == "409" else "ambiguous")

        def conflict(ctx):
            raise RuntimeError("409")

        self.assertEqual(lenient.once(Key(scope, "ticket", 3), conflict).status, "failed")

    def test_reconciler_and_wait(self):
        scope = fresh("rec")

        def timeout(ctx):
            raise TimeoutError("timeout")

        self.client.once(Key(scope, "send", "x"), timeout)
        rec = LedgerClient(self.gw.admin_url, TOKEN, reconcile=lambda e: "committed" if e.intent == "send" else "unknown")
        r = rec.once(Key(scope, "send", "x"), lambda ctx: self.fail("must not run"))
        self.assertEqual((r.status, r.entry.resolved_by), ("replayed", "reconciler"))

        started, hold = threading.Event(), threading.Event()

        def slow(ctx):
            started.set()
            hold.wait(10)
            return "done"

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(self.client.once, Key(scope, "slow", 1), slow)
            started.wait(10)
            waiting = pool.submit(self.client.once, Key(scope, "slow", 1), lambda ctx: "twice", wait=10)
            time.sleep(0.1)
            hold.set()
            self.assertEqual(first.result().status, "executed")
            w = waiting.result()
        self.assertEqual((w.status, w.value), ("replayed", "done"))

    def test_effect_context_and_deadline(self):
        scope = fresh("deadline")
        seen = []

        def effect(ctx):
            seen.append(ctx)
            ctx.cancelled.wait(10)  # a sync effect stops when its claim would read as abandoned
            raise TimeoutError("gave up at the deadline")

        r = self.client.once(Key(scope, "call", 1), effect, pending_ttl=0.3)
        self.assertEqual(r.status, "ambiguous", "an effect cut off at its deadline may have happened")
        ctx = seen[0]
        self.assertTrue(ctx.cancelled.is_set())
        self.assertEqual(ctx.idempotency_key, "ro_" + entry_id(scope, "call", 1))
        self.assertEqual(ctx.attempt, 1)

    def test_runs(self):
        scope = fresh("run")
        run = self.client.begin(scope, run_id="job-1", mode="exclusive", lease_ttl=60)
        self.assertTrue(run.can_write)
        self.assertEqual(run.mode, "exclusive")
        ref = self.client.run_ref(scope, "job-1", run.token)
        self.assertTrue(ref.heartbeat())
        self.assertEqual(ref.once("note", "a", lambda ctx: 1).status, "executed")
        self.assertTrue(ref.check("note", "a").done)
        ref.end("answered")
        self.assertEqual(ref.once("note", "b", lambda ctx: 1).reason, "run_ended")
        other = self.client.begin(scope, run_id="job-2", mode="exclusive")
        self.client.cancel(scope, "job-2")
        self.assertEqual(other.once("note", "c", lambda ctx: 1).reason, "run_cancelled")
        with self.assertRaises(LedgerError) as e:
            self.client.heartbeat(scope, "nope", 1)
        self.assertEqual((e.exception.code, e.exception.status), ("unknown_run", 404))

    def test_typed_errors(self):
        with self.assertRaises(LedgerError) as e:
            LedgerClient(self.gw.admin_url, "wrong").check(Key("s", "x"))
        self.assertEqual((e.exception.code, e.exception.status, e.exception.unavailable), ("unauthorized", 401, False))
        with self.assertRaises(LedgerError) as e:
            LedgerClient("http://127.0.0.1:9", timeout=2).check(Key("s", "x"))
        self.assertTrue(e.exception.unavailable)
        self.assertEqual(e.exception.status, 0)
        with self.assertRaises(LedgerError) as e:
            self.client.once(Key("", "x"), lambda ctx: 1)
        self.assertEqual(e.exception.code, "invalid_request")
        with self.assertRaises(ValueError):
            LedgerClient("ftp://x")


if __name__ == "__main__":
    unittest.main()
