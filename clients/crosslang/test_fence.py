"""A TypeScript run and a Python run on one scope of the real gateway, fenced
against each other: a newer run in one language supersedes the other's, a
later delivery of a run taken over from the other language fences it, both
name one effect by one entry id, and a write landed by one is the other's
conversation_changed.

The TypeScript side is clients/typescript/dist/test/crosslang-helper.js
(built by `npm run build` there); run this with
    python3 -m unittest discover -s clients/crosslang
"""

import json
import os
import shutil
import subprocess
import sys
import unittest
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))

from gateway import Gateway, ledger_config  # noqa: E402

from replyonce_gateway import Key, LedgerClient, entry_id  # noqa: E402

HELPER = REPO / "clients" / "typescript" / "dist" / "test" / "crosslang-helper.js"


def ts(action: str, **args) -> dict:
    node = shutil.which("node")
    if node is None or not HELPER.exists():
        raise AssertionError(f"needs node and {HELPER} (npm run build in clients/typescript)")
    out = subprocess.run([node, str(HELPER), action, json.dumps(args)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"typescript {action}: {out.stderr}")
    return json.loads(out.stdout)


def iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class CrossLanguageFence(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(ledger_config())
        cls.py = LedgerClient(cls.gw.admin_url)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def test_typescript_and_python_runs_fence_each_other(self):
        scope = f"xlang-{os.getpid()}"
        admin = self.gw.admin_url
        now = datetime.now(timezone.utc)

        # A Python run, then a newer TypeScript run: the TypeScript one owns the scope.
        py_run = self.py.begin(scope, run_id="py-1", mode="supersede", context_at=now - timedelta(seconds=3))
        ts_run = ts("begin", admin=admin, scope=scope, run_id="ts-1", mode="supersede", context_at=iso(now - timedelta(seconds=2)))
        self.assertGreater(ts_run["token"], py_run.token)
        ran = []
        r = py_run.once("reply", {"answers": ["m1"]}, lambda ctx: ran.append("python"), conflict="same-intent")
        self.assertEqual((r.status, r.reason), ("refused", "superseded"))
        self.assertEqual(ran, [])

        # The TypeScript run writes; Python sees the same entry, named the same way.
        w = ts("once", admin=admin, scope=scope, run_id="ts-1", token=ts_run["token"], intent="reply",
               payload={"answers": ["m1"], "channel": "chat"}, summary="typescript answered m1", conflict="same-intent")
        self.assertEqual((w["status"], w["ran"]), ("executed", True))
        payload = {"channel": "chat", "answers": ["m1"]}
        self.assertEqual(w["entry_id"], entry_id(scope, "reply", payload))
        self.assertEqual(ts("entry_id", admin=admin, scope=scope, intent="reply", payload=payload)["entry_id"], w["entry_id"])
        check = self.py.check(Key(scope, "reply", payload))
        self.assertTrue(check.done)
        self.assertEqual((check.entry.id, check.entry.value), (w["entry_id"], {"by": "typescript"}))

        # Python takes the TypeScript run over as its next delivery: the TypeScript delivery is fenced.
        taken = self.py.begin(scope, run_id="ts-1", mode="supersede")
        self.assertEqual(taken.delivery, 2)
        stale = ts("once", admin=admin, scope=scope, run_id="ts-1", token=ts_run["token"], intent="tag", payload="vip")
        self.assertEqual((stale["status"], stale["reason"], stale["ran"]), ("refused", "superseded", False))
        tagged = taken.once("tag", "vip", lambda ctx: "python tagged", conflict="same-intent")
        self.assertEqual((tagged.status, tagged.reason), ("executed", ""))

        # Peers (the same contextAt): the TypeScript write is Python's conversation_changed.
        peer_at = datetime.now(timezone.utc)  # after every write so far has landed
        py_peer = self.py.begin(scope, run_id="py-3", mode="supersede", context_at=peer_at)
        ts_peer = ts("begin", admin=admin, scope=scope, run_id="ts-3", mode="supersede", context_at=iso(peer_at))
        w2 = ts("once", admin=admin, scope=scope, run_id="ts-3", token=ts_peer["token"], intent="reply",
                payload={"answers": ["m2"]}, summary="typescript answered m2", conflict="same-intent")
        self.assertEqual((w2["status"], w2.get("reason")), ("executed", None))
        changed = py_peer.once("reply", {"answers": ["m2", "m3"]}, lambda ctx: ran.append("python"), conflict="same-intent")
        self.assertEqual((changed.status, changed.reason), ("refused", "conversation_changed"))
        self.assertEqual([(c.id, c.summary) for c in changed.conflicts], [(w2["entry_id"], "typescript answered m2")])
        # After re-reading, Python answers only what is left.
        self.assertEqual(py_peer.once("reply", {"answers": ["m3"]}, lambda ctx: "python answered m3", conflict="same-intent").status, "executed")
        self.assertEqual(ran, [])


if __name__ == "__main__":
    unittest.main()
