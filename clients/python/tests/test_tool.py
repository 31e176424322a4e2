import asyncio
import json
import unittest

from gateway import REPO  # noqa: F401

from replyonce_gateway import (
    CheckResult,
    EffectContext,
    Entry,
    Key,
    LedgerError,
    Result,
    adispatch_tool,
    anthropic_tool_result,
    check_tool,
    dispatch_tool,
    guard_tool,
    mcp_tool_result,
    openai_chat_tool_message,
    openai_responses_output,
    to_anthropic_tool,
    to_mcp_tool,
    to_openai_chat_tool,
    to_openai_responses_tool,
    tool_outcome,
)
from datetime import datetime, timezone


class FakeRun:
    """A run whose answers the test picks, recording what it was asked."""

    def __init__(self, answer, check=None):
        self.answer, self.check_answer, self.calls = answer, check or CheckResult(done=False), []

    def once(self, intent, payload, effect, **options):
        self.calls.append((intent, payload, options))
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer.status == "executed":
            ctx = EffectContext(Key("s", intent, payload), "e", 1, "ro_e", 0, datetime.now(timezone.utc))
            return Result(status="executed", value=effect(ctx))
        return self.answer

    def check(self, intent, payload):
        self.calls.append((intent, payload))
        return self.check_answer


class AsyncFakeRun(FakeRun):
    async def once(self, intent, payload, effect, **options):
        r = FakeRun.once(self, intent, payload, effect, **options)
        if asyncio.iscoroutine(r.value):
            r.value = await r.value
        return r

    async def check(self, intent, payload):
        return FakeRun.check(self, intent, payload)


def identity(a):
    if not a.get("order"):
        raise ValueError("order is required")
    return {"order": a["order"], "cents": a["cents"]}


refund = guard_tool("refund", "Refund an order", identity=identity,
                    execute=lambda a, ctx: {"refund_id": "re_" + a["order"]},
                    parameters={"type": "object", "properties": {"order": {"type": "string"}, "cents": {"type": "integer"}}},
                    summary=lambda a: f"refund {a['cents']} on {a['order']}", conflict="same-intent")


class Tools(unittest.TestCase):
    def test_guarded_call_uses_the_identity(self):
        run = FakeRun(Result(status="executed"))
        o = refund.call(run, '{"order":"A-1","cents":2500,"note":"sorry!"}')
        self.assertEqual(json.loads(o.text), {"status": "executed", "message": "Done.", "result": {"refund_id": "re_A-1"}})
        self.assertEqual(run.calls[0][1], {"order": "A-1", "cents": 2500})
        self.assertEqual(run.calls[0][2]["summary"], "refund 2500 on A-1")
        self.assertEqual(run.calls[0][2]["conflict"], "same-intent")

    def test_outcome_flags_match_the_go_tool_package(self):
        cases = [
            (Result("executed"), "executed", (False, False, False, False)),
            (Result("replayed"), "replayed", (False, False, False, False)),
            (Result("in_flight"), "in_flight", (True, False, True, False)),
            (Result("failed", error="declined"), "failed", (True, False, True, False)),
            (Result("ambiguous", error="timeout"), "ambiguous", (True, True, False, True)),
            (Result("refused", reason="conversation_changed"), "conversation_changed", (True, False, True, False)),
            (Result("refused", reason="busy"), "busy", (True, False, True, False)),
            (Result("refused", reason="superseded"), "superseded", (True, True, False, False)),
            (Result("refused", reason="run_cancelled"), "run_cancelled", (True, True, False, False)),
            (Result("refused", reason="run_ended"), "run_ended", (True, True, False, False)),
            (Result("refused", reason="exhausted"), "exhausted", (True, True, False, True)),
            (Result("refused", reason="rate_limited"), "rate_limited", (True, True, False, True)),
            (Result("refused", reason="something_new"), "something_new", (True, True, False, True)),
        ]
        for r, status, flags in cases:
            with self.subTest(status):
                o = tool_outcome(r)
                self.assertEqual(o.status, status)
                self.assertEqual((o.is_error, o.terminal, o.retryable, o.escalate), flags)
                self.assertEqual(json.loads(o.text)["status"], status)
        self.assertIn("(timeout)", tool_outcome(Result("ambiguous", error="timeout")).message)
        conflict = Entry(id="x", scope="s", intent="reply", state="pending", attempt=1, idempotency_key="ro_x", summary="Thanks")
        o = tool_outcome(Result("refused", reason="conversation_changed", conflicts=[conflict]))
        self.assertEqual(json.loads(o.text)["conflicts"], [{"intent": "reply", "state": "pending", "summary": "Thanks"}])

    def test_bad_arguments_no_run_unknown_run_outage(self):
        run = FakeRun(Result("executed"))
        self.assertEqual(refund.call(run, '{"cents":1}').status, "invalid_arguments")
        self.assertEqual(refund.call(run, "{not json").status, "invalid_arguments")
        self.assertEqual(refund.call(None, "{}").status, "no_run")
        o = refund.call(FakeRun(LedgerError("unknown_run", "x", 404)), {"order": "A", "cents": 1})
        self.assertEqual((o.status, o.terminal, o.escalate), ("unknown_run", True, True))
        with self.assertRaises(LedgerError):
            refund.call(FakeRun(LedgerError("store_unavailable", "down", 503)), {"order": "A", "cents": 1})

    def test_check_already_done(self):
        check = check_tool(refund)
        entry = Entry(id="e", scope="s", intent="refund", state="committed", attempt=1, idempotency_key="ro_e",
                      value={"refund_id": "re_A"})
        run = FakeRun(Result("executed"), CheckResult(done=True, status="replayed", entry=entry))
        o = check.call(run, {"tool": "refund", "arguments": {"order": "A", "cents": 5, "note": "x"}})
        self.assertEqual(o.status, "done")
        self.assertEqual(json.loads(o.text)["result"], {"refund_id": "re_A"})
        self.assertEqual(run.calls[0], ("refund", {"order": "A", "cents": 5}))
        self.assertEqual(check.call(run, {"tool": "nope", "arguments": {}}).status, "invalid_arguments")
        self.assertEqual(check.call(FakeRun(Result("executed")), {"tool": "refund", "arguments": {"order": "A", "cents": 5}}).status, "not_done")
        self.assertTrue(check.read_only)
        with self.assertRaises(ValueError):
            check_tool(check)

    def test_sdk_shapes(self):
        self.assertEqual(to_openai_chat_tool(refund), {"type": "function", "function": {"name": "refund", "description": "Refund an order", "parameters": refund.parameters, "strict": False}})
        self.assertEqual(to_openai_responses_tool(refund)["name"], "refund")
        self.assertEqual(to_anthropic_tool(refund)["input_schema"]["type"], "object")
        self.assertEqual(to_mcp_tool(check_tool(refund))["annotations"], {"idempotentHint": True, "readOnlyHint": True})
        o = dispatch_tool([refund], FakeRun(Result("replayed", value={"refund_id": "re_1"})), "refund", '{"order":"A","cents":1}')
        self.assertEqual(openai_chat_tool_message("call_1", o), {"role": "tool", "tool_call_id": "call_1", "content": o.text})
        self.assertEqual(openai_responses_output("c2", o), {"type": "function_call_output", "call_id": "c2", "output": o.text})
        self.assertEqual(anthropic_tool_result("tu_1", o), {"type": "tool_result", "tool_use_id": "tu_1", "content": o.text, "is_error": False})
        self.assertEqual(mcp_tool_result(o)["_meta"]["replyonce"]["status"], "replayed")
        u = dispatch_tool([refund], None, "delete_everything", "{}")
        self.assertEqual((u.status, u.retryable), ("unknown_tool", True))

    def test_async_tools(self):
        async def execute(a, ctx):
            return {"refund_id": "re_" + a["order"]}

        t = guard_tool("refund", "Refund", identity=identity, execute=execute)

        async def go():
            o = await adispatch_tool([t], AsyncFakeRun(Result("executed")), "refund", {"order": "B", "cents": 1})
            c = await check_tool(t).acall(AsyncFakeRun(Result("executed"), CheckResult(done=False, status="in_flight")),
                                          {"tool": "refund", "arguments": {"order": "B", "cents": 1}})
            return o, c

        o, c = asyncio.run(go())
        self.assertEqual(json.loads(o.text)["result"], {"refund_id": "re_B"})
        self.assertEqual(c.status, "in_flight")


if __name__ == "__main__":
    unittest.main()
