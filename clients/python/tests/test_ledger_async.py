"""The asyncio client against the real gateway: the same races, with the
effects as coroutines."""

import asyncio
import itertools
import os
import unittest
from datetime import datetime, timedelta, timezone

from gateway import Gateway, ledger_config

from replyonce_gateway import AsyncLedgerClient, Key, LedgerError, NotApplied, entry_id

_n = itertools.count()


def fresh(name):
    return f"pya-{name}-{os.getpid()}-{next(_n)}"


class AsyncLedgerSuite(unittest.IsolatedAsyncioTestCase):
    gw: Gateway

    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(ledger_config())

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def setUp(self):
        self.client = AsyncLedgerClient(self.gw.admin_url)

    async def test_three_concurrent_onces_then_a_late_retry(self):
        scope = fresh("order")
        refunds = []

        async def effect(ctx):
            refunds.append(ctx.idempotency_key)
            await asyncio.sleep(0.05)
            return {"refund_id": "re_1"}

        key = Key(scope, "refund", {"order": "A-1001", "cents": 2500})
        raced = await asyncio.gather(*(self.client.once(key, effect) for _ in range(3)))
        late = await self.client.once(key, effect)
        self.assertEqual(sorted(r.status for r in raced), ["executed", "in_flight", "in_flight"])
        self.assertEqual((late.status, late.value), ("replayed", {"refund_id": "re_1"}))
        self.assertEqual(refunds, ["ro_" + entry_id(scope, "refund", {"order": "A-1001", "cents": 2500})])

    async def test_superseded_and_conversation_changed(self):
        scope = fresh("conv")
        now = datetime.now(timezone.utc)
        r1 = await self.client.begin(scope, run_id="m1", mode="supersede", context_at=now - timedelta(seconds=2))
        started, hold = asyncio.Event(), asyncio.Event()

        async def slow(ctx):
            started.set()
            await hold.wait()
            return {"message_id": "r1"}

        first = asyncio.ensure_future(r1.once("reply", {"answers": ["m1"]}, slow, summary="Thanks, we got m1", conflict="same-intent"))
        await started.wait()
        r2 = await self.client.begin(scope, run_id="m2", mode="supersede", context_at=now - timedelta(seconds=1))
        changed = await r2.once("reply", {"answers": ["m1", "m2"]}, lambda ctx: self.fail("must not run"), conflict="same-intent")
        self.assertEqual((changed.status, changed.reason), ("refused", "conversation_changed"))
        self.assertEqual(changed.conflicts[0].summary, "Thanks, we got m1")
        hold.set()
        self.assertEqual((await first).status, "executed")
        # r1 was superseded by r2 meanwhile: its next write is refused.
        self.assertEqual((await r1.once("tag", "x", lambda ctx: 1)).reason, "superseded")
        self.assertEqual((await r2.once("reply", {"answers": ["m2"]}, lambda ctx: {"message_id": "r2"}, conflict="same-intent")).status, "executed")

    async def test_errors_and_the_deadline(self):
        scope = fresh("errors")

        async def declined(ctx):
            raise NotApplied("card declined")

        self.assertEqual((await self.client.once(Key(scope, "charge", 1), declined)).status, "failed")

        async def hangs(ctx):
            await asyncio.sleep(30)

        r = await self.client.once(Key(scope, "call", 1), hangs, pending_ttl=0.3)
        self.assertEqual(r.status, "ambiguous", "an effect cut off at its deadline may have happened")
        self.assertIn("deadline", r.error)
        with self.assertRaises(LedgerError) as e:
            await AsyncLedgerClient("http://127.0.0.1:9", timeout=2).check(Key("s", "x"))
        self.assertTrue(e.exception.unavailable)

    async def test_runs(self):
        scope = fresh("run")
        run = await self.client.begin(scope, run_id="job-1")
        ref = self.client.run_ref(scope, "job-1", run.token)
        self.assertTrue(await ref.heartbeat())
        self.assertEqual((await ref.once("note", "a", lambda ctx: 1)).status, "executed")
        self.assertTrue((await ref.check("note", "a")).done)
        self.assertEqual([e.intent for e in await self.client.history(scope)], ["note"])
        await ref.end("done")
        self.assertEqual((await ref.once("note", "b", lambda ctx: 1)).reason, "run_ended")


if __name__ == "__main__":
    unittest.main()
