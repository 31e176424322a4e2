package mcptool

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replyonce/gateway/ledger/tool"
)

// The names of the run the gateway forwards, as HTTP headers and as _meta
// keys.
const (
	HeaderScope        = "Replyonce-Scope"
	HeaderRunID        = "Replyonce-Run-Id"
	HeaderFencingToken = "Replyonce-Fencing-Token"
)

// RunRef builds a handle on the run a call names: ledger.(*Ledger).RunRef
// in process, or ledgerapi.(*Client).RunRef behind the gateway, wrapped to
// return a tool.Run.
type RunRef func(scope, runID string, token uint64) tool.Run

// Tool is t's MCP definition, with the IdempotentHint annotation.
func Tool(t *tool.Tool) *mcp.Tool {
	d := t.Definition()
	return &mcp.Tool{
		Name:        d.Name,
		Description: d.Description,
		InputSchema: d.Parameters,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, ReadOnlyHint: t.ReadOnly()},
	}
}

// Options tune the handlers.
type Options struct {
	// Logger receives the details of a ledger outage (the ledger's
	// address, the dial or store error), which the client hears only as
	// an internal error. Default slog.Default().
	Logger *slog.Logger
}

// OutageMessage is the message of the JSON-RPC internal error (code
// -32603) a call gets when the ledger cannot be asked.
const OutageMessage = "replyonce: the ledger could not be reached, so nothing was done or decided; try again later"

// AddTools registers tools on s, each calling under the run its request
// names.
func AddTools(s *mcp.Server, runRef RunRef, tools ...*tool.Tool) {
	AddToolsWith(s, runRef, Options{}, tools...)
}

// AddToolsWith is AddTools with options.
func AddToolsWith(s *mcp.Server, runRef RunRef, opts Options, tools ...*tool.Tool) {
	for _, t := range tools {
		s.AddTool(Tool(t), HandlerWith(t, runRef, opts))
	}
}

// Handler is t as an MCP tool handler, with the default options.
func Handler(t *tool.Tool, runRef RunRef) mcp.ToolHandler { return HandlerWith(t, runRef, Options{}) }

// HandlerWith is t as an MCP tool handler. Every answer of the tool, the
// model's mistakes and a run named wrongly included, is a result in one
// shape (Result): the outcome's JSON text, IsError set when the action
// was not done by this call, and the status, terminal, retryable and
// escalate flags under the result's _meta "replyonce" key. Only a ledger
// outage is a protocol error, the JSON-RPC internal error -32603 with
// OutageMessage, since the ledger decided nothing; its details go to the
// logger, not to the client.
//
// The effect runs on a context that the client's cancellation does not
// end: a client that gives up (a timeout) must not turn an effect under
// way into an ambiguous one. The ledger still bounds it by the claim's
// pending TTL.
func HandlerWith(t *tool.Tool, runRef RunRef, opts Options) mcp.ToolHandler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	name := t.Definition().Name
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, ok := tool.RunFrom(ctx); !ok {
			scope, runID, token, found, err := RunOf(req)
			if err != nil {
				return Result(tool.InvalidRun(err)), nil
			}
			if found {
				ctx = tool.WithRun(ctx, runRef(scope, runID, token))
			}
		}
		out, err := t.Call(context.WithoutCancel(ctx), req.Params.Arguments)
		if err != nil {
			log.ErrorContext(ctx, "replyonce tool: ledger outage, the call was answered -32603", "tool", name, "error", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: OutageMessage}
		}
		return Result(out), nil
	}
}

// Result is an outcome as an MCP tool result.
func Result(out tool.Outcome) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: out.Text}},
		IsError: out.IsError,
		Meta: mcp.Meta{"replyonce": map[string]any{
			"status": string(out.Status), "terminal": out.Terminal, "retryable": out.Retryable, "escalate": out.Escalate,
		}},
	}
}

// RunOf reads the run a request names, from its HTTP headers when it has
// Replyonce-Scope, else from its _meta. found is false when neither names
// one; err names the header or key that is malformed.
func RunOf(req *mcp.CallToolRequest) (scope, runID string, token uint64, found bool, err error) {
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	if h.Get(HeaderScope) != "" {
		return parse("header", h.Get(HeaderScope), h.Get(HeaderRunID), h.Get(HeaderFencingToken))
	}
	var meta map[string]any
	if req.Params != nil {
		meta = req.Params.Meta
	}
	get := func(name string) (string, error) {
		for k, v := range meta {
			if !strings.EqualFold(k, name) {
				continue
			}
			switch x := v.(type) {
			case string:
				return x, nil
			case float64: // a token sent as a JSON number
				if x < 0 || x != math.Trunc(x) || x > 1<<53 {
					return "", fmt.Errorf("_meta %s: %v is not a token; send it as a string", name, x)
				}
				return strconv.FormatUint(uint64(x), 10), nil
			default:
				return "", fmt.Errorf("_meta %s must be a string, not %T", name, v)
			}
		}
		return "", nil
	}
	s, err1 := get(HeaderScope)
	id, err2 := get(HeaderRunID)
	tok, err3 := get(HeaderFencingToken)
	for _, e := range []error{err1, err2, err3} {
		if e != nil {
			return "", "", 0, false, e
		}
	}
	if s == "" && id == "" && tok == "" {
		return "", "", 0, false, nil
	}
	return parse("_meta", s, id, tok)
}

func parse(where, scope, runID, token string) (string, string, uint64, bool, error) {
	if scope == "" || runID == "" {
		return "", "", 0, false, fmt.Errorf("%s %s and %s are both required to name the run", where, HeaderScope, HeaderRunID)
	}
	tok, err := strconv.ParseUint(token, 10, 64)
	if err != nil || tok == 0 {
		return "", "", 0, false, fmt.Errorf("%s %s: %q is not a fencing token (a positive integer)", where, HeaderFencingToken, token)
	}
	return scope, runID, tok, true, nil
}
