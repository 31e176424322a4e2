package mcptool

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

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

// AddTools registers tools on s, each calling under the run its request
// names.
func AddTools(s *mcp.Server, runRef RunRef, tools ...*tool.Tool) {
	for _, t := range tools {
		s.AddTool(Tool(t), Handler(t, runRef))
	}
}

// Handler is t as an MCP tool handler. A tool's outcome is always a
// result, with IsError set when the action was not done by this call, and
// its status, terminal, retryable and escalate flags under the result's
// _meta "replyonce" key. Only a ledger outage is a protocol error, since
// the ledger decided nothing.
//
// The effect runs on a context that the client's cancellation does not
// end: a client that gives up (a timeout) must not turn an effect under
// way into an ambiguous one. The ledger still bounds it by the claim's
// pending TTL.
func Handler(t *tool.Tool, runRef RunRef) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, ok := tool.RunFrom(ctx); !ok {
			scope, runID, token, found, err := RunOf(req)
			if err != nil {
				return errorResult(err), nil
			}
			if found {
				ctx = tool.WithRun(ctx, runRef(scope, runID, token))
			}
		}
		out, err := t.Call(context.WithoutCancel(ctx), req.Params.Arguments)
		if err != nil {
			return nil, err
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

func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}, IsError: true}
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
