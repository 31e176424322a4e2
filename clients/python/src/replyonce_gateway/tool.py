"""Guarded tools for LLM tool-calling loops: a repeated tool call is
replayed, refused or escalated instead of being done again. The model is
told what happened in the same words as the Go package ledger/tool, and the
tool definitions and result messages come in the shapes of the OpenAI (Chat
Completions and Responses), Anthropic and MCP SDKs, as plain dicts, so no
SDK is a dependency.

A tool is called with a run: ``tool.call(run, args)`` for a Run of
LedgerClient, ``await tool.acall(run, args)`` for an AsyncRun (whose effect
may be a coroutine function)."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .errors import LedgerError
from .types import CheckResult, EffectContext, Result

__all__ = [
    "CHECK_TOOL_NAME",
    "Tool",
    "ToolOutcome",
    "anthropic_tool_result",
    "check_tool",
    "dispatch_tool",
    "adispatch_tool",
    "guard_tool",
    "mcp_tool_result",
    "openai_chat_tool_message",
    "openai_responses_output",
    "to_anthropic_tool",
    "to_mcp_tool",
    "to_openai_chat_tool",
    "to_openai_responses_tool",
    "tool_outcome",
]


@dataclass
class ToolOutcome:
    """The model-facing answer of one tool call. ``text`` is what goes back
    to the model: JSON with status, message, and result or conflicts."""

    status: str
    message: str
    is_error: bool = False
    terminal: bool = False  # the loop must stop
    retryable: bool = False  # calling again (after the message's advice) may help
    escalate: bool = False  # a person must look
    value: Any = None
    conflicts: list[dict] = field(default_factory=list)
    text: str = ""

    def __post_init__(self) -> None:
        body: dict = {"status": self.status, "message": self.message}
        if self.value is not None:
            body["result"] = self.value
        if self.conflicts:
            body["conflicts"] = self.conflicts
        self.text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _err(e: str) -> str:
    return f" ({e})" if e else ""


def tool_outcome(r: Result) -> ToolOutcome:
    """Map a ledger result to what the model is told."""
    v = r.value
    if r.status == "executed":
        return ToolOutcome("executed", "Done.", value=v)
    if r.status == "replayed":
        return ToolOutcome("replayed", "Already done earlier; this call did nothing. Do not tell the customer again and do not repeat it.", value=v)
    if r.status == "in_flight":
        return ToolOutcome("in_flight", "The same action is being done right now by another attempt, and this call did nothing. Wait a moment, then call again with the same arguments (it will not be done twice) or use check_already_done to see how it ended.",
                           is_error=True, retryable=True, value=v)
    if r.status == "failed":
        return ToolOutcome("failed", f"It failed and certainly did not happen{_err(r.error)}. It is safe to try again.",
                           is_error=True, retryable=True, value=v)
    if r.status == "ambiguous":
        return ToolOutcome("ambiguous", f"It may or may not have happened{_err(r.error)}. Do not repeat it; a person will check. Stop here.",
                           is_error=True, terminal=True, escalate=True, value=v)
    if r.status == "refused":
        return _refused(r)
    return ToolOutcome(r.status, f"The ledger answered {r.status}, which this tool does not know; nothing is assumed done. Stop here.",
                       is_error=True, terminal=True, escalate=True, value=v)


def _refused(r: Result) -> ToolOutcome:
    reason = r.reason or "refused"
    if reason == "conversation_changed":
        conflicts = []
        for e in r.conflicts:
            c = {"intent": e.intent, "state": e.state}
            if e.summary:
                c["summary"] = e.summary
            conflicts.append(c)
        return ToolOutcome(reason, "Not done: the conversation changed since you read it (see conflicts). Re-read it, then decide again; call again only if it is still needed.",
                           is_error=True, retryable=True, conflicts=conflicts)
    fixed = {
        "busy": ("Not done: another run holds this conversation right now. Try again later.", False, True, False),
        "superseded": ("Not done: a newer run now handles this conversation. Stop; say nothing more.", True, False, False),
        "run_cancelled": ("Not done: this run was cancelled. Stop; say nothing more.", True, False, False),
        "run_ended": ("Not done: this run has already ended. Stop; say nothing more.", True, False, False),
        "exhausted": ("Not done: it failed too many times. Do not try again; a person will take over. Stop here.", True, False, True),
        "rate_limited": ("Not done: this conversation reached its limit for this action, which looks like a loop. A person will take over. Stop here.", True, False, True),
    }
    if reason in fixed:
        msg, terminal, retryable, escalate = fixed[reason]
        return ToolOutcome(reason, msg, is_error=True, terminal=terminal, retryable=retryable, escalate=escalate)
    return ToolOutcome(reason, f"Not done: refused ({reason}). Stop here; a person will look.", is_error=True, terminal=True, escalate=True)


def _invalid(message: str) -> ToolOutcome:
    return ToolOutcome("invalid_arguments", f"{message}. Nothing was done; fix the arguments and call again.", is_error=True, retryable=True)


def _no_run(name: str) -> ToolOutcome:
    return ToolOutcome("no_run", f"Tool {name} cannot act: it was called outside a ledger run, so nothing was done. Stop here.",
                       is_error=True, terminal=True, escalate=True)


def _ledger_refused_input(e: LedgerError) -> ToolOutcome:
    if e.code == "unknown_run":
        return ToolOutcome("unknown_run", "The ledger does not know this run, so nothing was done. Stop and hand over to a person.",
                           is_error=True, terminal=True, escalate=True)
    if e.code in ("invalid_request", "body_too_large", "unsupported_media_type"):
        return ToolOutcome("invalid_arguments", f"The ledger refused this call as invalid ({e}); nothing was done.", is_error=True)
    raise e


_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
CHECK_TOOL_NAME = "check_already_done"


def _parse_args(name: str, args: Any) -> dict:
    if args is None or args == "":
        return {}
    if isinstance(args, (str, bytes)):
        try:
            args = json.loads(args)
        except ValueError as e:
            raise ValueError(f"arguments are not valid for {name}: {e}") from e
    if not isinstance(args, dict):
        raise ValueError(f"arguments are not valid for {name}: not a JSON object")
    return args


class Tool:
    """A tool the model may call: a guarded one (guard_tool) or the
    read-only check_already_done (check_tool)."""

    def __init__(self, name: str, description: str, parameters: Optional[dict], intent: Optional[str], read_only: bool) -> None:
        if not _NAME.fullmatch(name or ""):
            raise ValueError(f"tool: name {name!r} must be 1 to 64 letters, digits, '_' or '-'")
        params = parameters if parameters is not None else {"type": "object", "properties": {}}
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise ValueError(f"tool {name}: parameters must be an object schema")
        self.name, self.description, self.parameters = name, description, params
        self.intent = intent or name
        self.read_only = read_only

    def identity_of(self, args: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def call(self, run: Any, args: Any) -> ToolOutcome:  # pragma: no cover - overridden
        raise NotImplementedError

    async def acall(self, run: Any, args: Any) -> ToolOutcome:  # pragma: no cover - overridden
        raise NotImplementedError


class _Guarded(Tool):
    def __init__(self, name: str, description: str, parameters: Optional[dict], intent: Optional[str],
                 identity: Callable[[dict], Any], execute: Callable[[dict, EffectContext], Any],
                 summary: Optional[Callable[[dict], str]], conflict: Optional[str], wait: Optional[float],
                 pending_ttl: Optional[float]) -> None:
        super().__init__(name, description, parameters, intent, read_only=False)
        self._identity, self._execute, self._summary = identity, execute, summary
        self._conflict, self._wait, self._pending_ttl = conflict, wait, pending_ttl

    def _decode(self, raw: Any) -> tuple[dict, Any]:
        args = _parse_args(self.name, raw)
        try:
            return args, self._identity(args)
        except Exception as e:
            raise ValueError(f"arguments are not valid for {self.name}: {e}") from e

    def identity_of(self, args: Any) -> Any:
        return self._decode(args)[1]

    def _options(self, args: dict) -> dict:
        return dict(summary=self._summary(args) if self._summary else "", conflict=self._conflict, wait=self._wait,
                    pending_ttl=self._pending_ttl)

    def call(self, run: Any, raw: Any) -> ToolOutcome:
        if run is None:
            return _no_run(self.name)
        try:
            args, ident = self._decode(raw)
        except ValueError as e:
            return _invalid(str(e))
        try:
            res = run.once(self.intent, ident, lambda ctx: self._execute(args, ctx), **self._options(args))
        except LedgerError as e:
            return _ledger_refused_input(e)
        return tool_outcome(res)

    async def acall(self, run: Any, raw: Any) -> ToolOutcome:
        if run is None:
            return _no_run(self.name)
        try:
            args, ident = self._decode(raw)
        except ValueError as e:
            return _invalid(str(e))
        try:
            res = await run.once(self.intent, ident, lambda ctx: self._execute(args, ctx), **self._options(args))
        except LedgerError as e:
            return _ledger_refused_input(e)
        return tool_outcome(res)


def guard_tool(name: str, description: str, *, identity: Callable[[dict], Any], execute: Callable[[dict, EffectContext], Any],
               parameters: Optional[dict] = None, intent: Optional[str] = None,
               summary: Optional[Callable[[dict], str]] = None, conflict: Optional[str] = None,
               wait: Optional[float] = None, pending_ttl: Optional[float] = None) -> Tool:
    """Make a side-effecting tool that runs at most once per identity within
    the run's scope. identity picks the fields of the arguments that make
    two calls the same action (the order refunded, the message answered):
    never the model's wording or its tool-call id, which change on a retry;
    raise to refuse the arguments. execute performs the action (raise
    NotApplied when it certainly did not happen); its value is stored and
    replayed."""
    return _Guarded(name, description, parameters, intent, identity, execute, summary, conflict, wait, pending_ttl)


class _Check(Tool):
    def __init__(self, tools: tuple[Tool, ...]) -> None:
        self._by_name: dict[str, Tool] = {}
        for t in tools:
            if t.read_only:
                continue
            if t.name in self._by_name:
                raise ValueError(f"tool: {t.name} is given twice")
            self._by_name[t.name] = t
        names = list(self._by_name)
        if not names:
            raise ValueError(f"tool: {CHECK_TOOL_NAME} needs at least one guarded tool")
        super().__init__(CHECK_TOOL_NAME,
                         "Look up, without doing anything, whether an action was already done in this conversation. Call it before repeating an action you may have done.",
                         {"type": "object",
                          "properties": {"tool": {"type": "string", "enum": names, "description": "the tool whose action to look up"},
                                         "arguments": {"type": "object", "description": "the arguments you would call it with"}},
                          "required": ["tool", "arguments"], "additionalProperties": False},
                         CHECK_TOOL_NAME, read_only=True)

    def identity_of(self, args: Any) -> Any:
        return None

    def _target(self, raw: Any) -> tuple[Tool, Any]:
        a = _parse_args(self.name, raw)
        target = self._by_name.get(a.get("tool")) if isinstance(a.get("tool"), str) else None
        if target is None:
            raise ValueError(f"{CHECK_TOOL_NAME}: tool {a.get('tool')!r} is not one of {list(self._by_name)!r}")
        return target, target.identity_of(a.get("arguments"))

    def call(self, run: Any, raw: Any) -> ToolOutcome:
        if run is None:
            return _no_run(self.name)
        try:
            target, ident = self._target(raw)
        except ValueError as e:
            return _invalid(str(e))
        try:
            return _from_check(run.check(target.intent, ident))
        except LedgerError as e:
            return _ledger_refused_input(e)

    async def acall(self, run: Any, raw: Any) -> ToolOutcome:
        if run is None:
            return _no_run(self.name)
        try:
            target, ident = self._target(raw)
        except ValueError as e:
            return _invalid(str(e))
        try:
            return _from_check(await run.check(target.intent, ident))
        except LedgerError as e:
            return _ledger_refused_input(e)


def _from_check(r: CheckResult) -> ToolOutcome:
    v = r.entry.value if r.entry else None
    if r.done:
        return ToolOutcome("done", "Already done. Do not do it again and do not tell the customer again.", value=v)
    if r.status == "in_flight":
        return ToolOutcome("in_flight", "Being done right now by another attempt. Do not start it again.", value=v)
    if r.status == "ambiguous":
        return ToolOutcome("ambiguous", "It may or may not have happened; a person has to check. Do not do it again.", value=v)
    if r.status == "failed":
        return ToolOutcome("failed", "An earlier attempt failed without taking effect. It has not been done.", value=v)
    return ToolOutcome("not_done", "Not done yet.", value=v)


def check_tool(*tools: Tool) -> Tool:
    """check_already_done: a read-only tool telling the model whether one of
    tools was already done for the same identity."""
    return _Check(tools)


def _unknown(tools: list[Tool], name: str) -> ToolOutcome:
    names = [t.name for t in tools]
    return ToolOutcome("unknown_tool", f"There is no tool named {json.dumps(name)}; the tools are {json.dumps(names)}.",
                       is_error=True, retryable=True)


def dispatch_tool(tools: list[Tool], run: Any, name: str, args: Any) -> ToolOutcome:
    """Perform the call of the tool named name; an unknown name is an
    outcome listing the tools."""
    for t in tools:
        if t.name == name:
            return t.call(run, args)
    return _unknown(tools, name)


async def adispatch_tool(tools: list[Tool], run: Any, name: str, args: Any) -> ToolOutcome:
    """dispatch_tool for an AsyncRun."""
    for t in tools:
        if t.name == name:
            return await t.acall(run, args)
    return _unknown(tools, name)


# ---- the SDKs' shapes ---------------------------------------------------------

def to_openai_chat_tool(t: Tool) -> dict:
    """A Chat Completions function tool (not strict)."""
    return {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters, "strict": False}}


def to_openai_responses_tool(t: Tool) -> dict:
    """A Responses API function tool (not strict)."""
    return {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": False}


def to_anthropic_tool(t: Tool) -> dict:
    """An Anthropic Messages API tool."""
    return {"name": t.name, "description": t.description, "input_schema": {"type": "object", **t.parameters}}


def to_mcp_tool(t: Tool) -> dict:
    """An MCP tool with its annotations: idempotent; read-only for check_already_done."""
    return {"name": t.name, "description": t.description, "inputSchema": {"type": "object", **t.parameters},
            "annotations": {"idempotentHint": True, "readOnlyHint": t.read_only}}


def openai_chat_tool_message(tool_call_id: str, o: ToolOutcome) -> dict:
    """The tool message answering a Chat Completions tool call."""
    return {"role": "tool", "tool_call_id": tool_call_id, "content": o.text}


def openai_responses_output(call_id: str, o: ToolOutcome) -> dict:
    """The function_call_output item answering a Responses API function call."""
    return {"type": "function_call_output", "call_id": call_id, "output": o.text}


def anthropic_tool_result(tool_use_id: str, o: ToolOutcome) -> dict:
    """The tool_result block answering an Anthropic tool_use block."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": o.text, "is_error": o.is_error}


def mcp_tool_result(o: ToolOutcome) -> dict:
    """The result of an MCP tools/call, with the loop's flags in _meta.replyonce."""
    return {"content": [{"type": "text", "text": o.text}], "isError": o.is_error,
            "_meta": {"replyonce": {"status": o.status, "terminal": o.terminal, "retryable": o.retryable, "escalate": o.escalate}}}
