import json
import unittest
from decimal import Decimal

from gateway import REPO  # noqa: F401 (puts the package on the path)

from replyonce_gateway import canonicalize, entry_id, idempotency_key

VECTORS = json.loads((REPO / "ledger" / "testdata" / "keys.json").read_text("utf-8"))["vectors"]


class SharedVectors(unittest.TestCase):
    def test_vectors_hash_as_in_go(self):
        self.assertGreaterEqual(len(VECTORS), 10)
        for v in VECTORS:
            with self.subTest(v["name"]):
                payload = json.loads(v["payload"])
                self.assertEqual(canonicalize(payload), v["canonical"])
                self.assertEqual(entry_id(v["scope"], v["intent"], payload), v["entry_id"])
                self.assertEqual(idempotency_key(v["scope"], v["intent"], payload), v["idempotency_key"])

    def test_values_built_in_code(self):
        flat = next(v for v in VECTORS if v["name"] == "flat object")
        self.assertEqual(entry_id(flat["scope"], flat["intent"], {"order": "A-1001", "cents": 2500}), flat["entry_id"])
        self.assertEqual(entry_id("s", "x", {"cents": 2500.0}), entry_id("s", "x", {"cents": Decimal("2.5e3")}))
        self.assertEqual(entry_id("s", "x", (1, 2)), entry_id("s", "x", [1, 2]))
        self.assertEqual(entry_id("s", "x"), entry_id("s", "x", None))
        self.assertEqual(canonicalize(2**53 + 1), "9007199254740992")

    def test_what_is_not_json_is_refused(self):
        for bad in (float("nan"), float("inf"), {"k": float("-inf")}, 10**400):
            with self.assertRaises(ValueError):
                canonicalize(bad)
        for bad in ({1: "int key"}, {"s": {1, 2}}, object()):
            with self.assertRaises(TypeError):
                canonicalize(bad)
        cyclic: dict = {}
        cyclic["self"] = cyclic
        with self.assertRaises(ValueError):
            canonicalize(cyclic)


if __name__ == "__main__":
    unittest.main()
