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

// The _meta keys that name the run under this package's namespace, the
// form MCP recommends for _meta keys (a prefix, then a slash). The header
// names (HeaderScope, ...) are accepted as keys too.
const (
	MetaScope        = "replyonce/scope"
	MetaRunID        = "replyonce/run-id"
	MetaFencingToken = "replyonce/fencing-token"
)

// metaField maps an accepted _meta key, lower-cased, to the header name
// it stands for.
func metaField(key string) (string, bool) {
	switch key {
	case "replyonce-scope", MetaScope:
		return HeaderScope, true
	case "replyonce-run-id", MetaRunID:
		return HeaderRunID, true
	case "replyonce-fencing-token", MetaFencingToken:
		return HeaderFencingToken, true
	}
	return "", false
}

// ours reports whether a lower-cased _meta key is in this package's
// namespace, where a key it does not know is refused rather than ignored:
// a misspelt run key would otherwise let the call through with no run.
func ours(key string) bool {
	return key == "replyonce" || strings.HasPrefix(key, "replyonce/") || strings.HasPrefix(key, "replyonce-")
}

// RunOf reads the run a request names, from its HTTP headers when it has
// Replyonce-Scope, else from its _meta (MetaScope, MetaRunID and
// MetaFencingToken, or the header names as keys, in any case). found is
// false when neither names one; err names the header or key that is
// malformed, or a _meta key in the replyonce namespace that this package
// does not know. Other _meta keys (the SDK's own, a host's) are ignored.
func RunOf(req *mcp.CallToolRequest) (scope, runID string, token uint64, found bool, err error) {
	var meta map[string]any
	if req.Params != nil {
		meta = req.Params.Meta
	}
	values := map[string]string{}
	from := map[string]string{}
	for k, v := range meta {
		lk := strings.ToLower(k)
		field, known := metaField(lk)
		if !known {
			if ours(lk) {
				return "", "", 0, false, fmt.Errorf("_meta key %q is not one this server understands (the run is named by %s, %s and %s)",
					k, MetaScope, MetaRunID, MetaFencingToken)
			}
			continue
		}
		val, err := metaString(k, v)
		if err != nil {
			return "", "", 0, false, err
		}
		if prev, twice := from[field]; twice && values[field] != val {
			return "", "", 0, false, fmt.Errorf("_meta keys %q and %q name different values for %s", prev, k, field)
		}
		values[field], from[field] = val, k
	}
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	if h.Get(HeaderScope) != "" {
		return parse("header", h.Get(HeaderScope), h.Get(HeaderRunID), h.Get(HeaderFencingToken))
	}
	if len(values) == 0 {
		return "", "", 0, false, nil
	}
	return parse("_meta", values[HeaderScope], values[HeaderRunID], values[HeaderFencingToken])
}

// metaString reads one run key's value: a string, or a token sent as a
// JSON number.
func metaString(key string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case float64:
		if x < 0 || x != math.Trunc(x) || x > 1<<53 {
			return "", fmt.Errorf("_meta %s: %v is not a token; send it as a string", key, x)
		}
		return strconv.FormatUint(uint64(x), 10), nil
	default:
		return "", fmt.Errorf("_meta %s must be a string, not %T", key, v)
	}
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
