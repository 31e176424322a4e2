"""replyonce_gateway: agents behind the replyonce gateway in Python, with the
standard library only (Python 3.10+, sync and asyncio).

- LedgerClient / AsyncLedgerClient speak the gateway's ledger API: begin,
  run_ref, claim, settle, once, check, heartbeat, end, cancel, history,
  ambiguous, resolve. Ledger outcomes are Results; a store or network
  failure raises LedgerError.
- verify_webhook and parse_delivery read the gateway's forwards; handlers
  for http.server and ASGI.
- guard_tool, check_tool and the OpenAI, Anthropic and MCP shapes guard the
  side-effecting tools of an LLM loop.
- canonicalize, entry_id and idempotency_key name effects as the Go ledger
  does (RFC 8785).

See docs/clients.md in the repository."""

from .aio import AsyncLedgerClient, AsyncRun
from .canonical import canonicalize, entry_id, idempotency_key
from .client import LedgerClient, Run
from .errors import LedgerError, NotApplied, classify_error
from .handler import ForwardAnswer, ahandle_forward, asgi_forward_app, forward_request_handler, handle_forward
from .tool import (
    CHECK_TOOL_NAME,
    Tool,
    ToolOutcome,
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
from .types import CheckResult, Claim, ClaimRef, EffectContext, Entry, Key, Result
from .webhook import (
    Delivery,
    DeliveryError,
    WebhookVerificationError,
    header,
    parse_covers,
    parse_delivery,
    sign_webhook,
    verify_webhook,
)

__all__ = [
    "AsyncLedgerClient", "AsyncRun", "LedgerClient", "Run",
    "canonicalize", "entry_id", "idempotency_key",
    "LedgerError", "NotApplied", "classify_error",
    "ForwardAnswer", "ahandle_forward", "asgi_forward_app", "forward_request_handler", "handle_forward",
    "CHECK_TOOL_NAME", "Tool", "ToolOutcome", "adispatch_tool", "anthropic_tool_result", "check_tool",
    "dispatch_tool", "guard_tool", "mcp_tool_result", "openai_chat_tool_message", "openai_responses_output",
    "to_anthropic_tool", "to_mcp_tool", "to_openai_chat_tool", "to_openai_responses_tool", "tool_outcome",
    "CheckResult", "Claim", "ClaimRef", "EffectContext", "Entry", "Key", "Result",
    "Delivery", "DeliveryError", "WebhookVerificationError", "header", "parse_covers", "parse_delivery",
    "sign_webhook", "verify_webhook",
]
