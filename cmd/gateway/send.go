package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replyonce/gateway/cmd/gateway/internal/suggest"
	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/signatures"
)

// send signs a test event as the source's provider would and posts it to a
// running gateway, so an operator can try a setup end to end.
func (a *App) send(ctx context.Context, args []string) error {
	fs := a.flags("send")
	path := fs.String("config", "", "configuration file")
	name := fs.String("source", "", "source to send to")
	eventID := fs.String("event-id", "", "event id (default: a new one)")
	bodyFile := fs.String("body", "", "file with the raw body to send (default: a small JSON event carrying the id); "+
		"an id the source reads from a header is put there, one read from the body is printed")
	to := fs.String("to", "", "URL to post to (default: http://{listen}/hooks/{source})")
	conversation := fs.String("conversation", "", "make the default event a chat message in this conversation "+
		`({"conversation_id", "message_id": the event id, "text"}), as the example agent reads it`)
	message := fs.String("message", "", "the chat message's text (with --conversation)")
	sample := fs.String("sample", "", "send a realistic sample event of this type for the source's provider "+
		"(an unknown type lists the available ones)")
	var headers headerFlags
	fs.Var(&headers, "header", "extra request header K:V, before signing (repeatable)")
	contentType := fs.String("content-type", "", "Content-Type of --body (default application/json)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *sample != "" && (*bodyFile != "" || *conversation != "") {
		return usageError{"--sample does not mix with --body or --conversation"}
	}
	if *message != "" && *conversation == "" {
		return usageError{"--message needs --conversation"}
	}
	if *conversation != "" && *bodyFile != "" {
		return usageError{"--conversation and --body do not mix: put the chat message in the body file"}
	}
	// send signs as the source and posts to the public listener: the
	// admin token, the agent's side and other sources are not its business.
	cfg, err := a.loadConfigFor(*path, []string{"listen", "sources." + *name}, []string{"sources." + *name + ".forward"})
	if err != nil {
		return err
	}
	src, ok := cfg.Sources[*name]
	if !ok {
		names := make([]string, 0, len(cfg.Sources))
		for n := range cfg.Sources {
			names = append(names, n)
		}
		slices.Sort(names)
		what := fmt.Sprintf("%q is not a source in %s", *name, *path)
		if *name == "" {
			what = "required"
		}
		return usageError{fmt.Sprintf("--source: %s%s (sources: %s)", what, suggest.Hint(*name, names), strings.Join(names, ", "))}
	}
	id := *eventID
	if id == "" {
		id = fmt.Sprintf("evt_test_%d", a.Clock().UnixNano())
	}
	target := *to
	if target == "" {
		host, port, _ := net.SplitHostPort(cfg.Listen)
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		target = "http://" + net.JoinHostPort(host, port) + "/hooks/" + url.PathEscape(*name)
	}
	templates := []string(src.EventID)
	if len(templates) == 0 {
		info, err := signatures.Lookup(src.Provider)
		if err != nil {
			return err
		}
		templates = info.EventID
	}
	req := &signatures.Request{Method: http.MethodPost, URL: src.Signature.URL, Header: http.Header{}}
	if req.URL == "" {
		req.URL = target
	}
	now := a.Clock()
	if *bodyFile != "" {
		if req.Body, err = os.ReadFile(*bodyFile); err != nil {
			return fmt.Errorf("--body: %w", err)
		}
		ct := *contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
		// The body is the user's; an id the rule reads from a header goes
		// there, so that a second send with the same --event-id is the
		// same event to the gateway.
		if len(templates) == 0 {
			// no rule to follow: the provider has none and the source sets none
		} else if kind, hname, ok := singlePlaceholder(templates[0]); ok && kind == "header" {
			req.Header.Set(hname, id)
		}
	} else if *sample != "" {
		if id, err = applySample(req, src.Provider, *sample, id, *eventID != "", now); err != nil {
			return err
		}
	} else if err := sampleEvent(req, templates, id, now, chatMessage{*conversation, *message}); err != nil {
		return err
	} else if *contentType != "" {
		req.Header.Set("Content-Type", *contentType)
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	signer, err := signatures.NewSigner(src.Provider, src.Signature)
	if err != nil {
		return fmt.Errorf("sources.%s: cannot sign test events: %w", *name, err)
	}
	unsigned := req.URL
	if err := signer.Sign(req, now); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	if req.URL != unsigned {
		// The signer put in the URL what the provider would (Twilio's
		// "bodySHA256" for a JSON body): the request must carry that query.
		if su, err := url.Parse(req.URL); err == nil {
			if tu, err := url.Parse(target); err == nil {
				tu.RawQuery = su.RawQuery
				target = tu.String()
			}
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(req.Body))
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	hreq.Header = req.Header
	// What the gateway will read as the event id, from the request as sent.
	// send's own event puts --event-id first in a composite id.
	ownEvent := *bodyFile == "" && *sample == ""
	if rule, err := extract.ParseRule(templates); err == nil {
		got, found := rule.Resolve(&extract.Input{Header: req.Header, Body: req.Body, ContentType: req.Header.Get("Content-Type"), Query: queryOf(target)})
		switch {
		case !found:
			fmt.Fprintf(a.Stderr, "warning: the gateway will find no event id in this request (rule %s)\n", rule)
			id = "(none)"
		case *eventID != "" && got != *eventID && !(ownEvent && strings.HasPrefix(got, *eventID)):
			fmt.Fprintf(a.Stderr, "warning: --event-id %q is not the event id: the source's rule %s reads %q from the request\n", *eventID, rule, got)
			id = got
		default:
			id = got
		}
	}
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(hreq)
	if err != nil {
		return fmt.Errorf("send to %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintf(a.Stdout, "POST %s (event %s)\n%s\n%s\n", target, id, resp.Status, strings.TrimSpace(string(body)))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("gateway answered %s", resp.Status)
	}
	return nil
}

// headerFlags collects repeated --header K:V.
type headerFlags [][2]string

func (h *headerFlags) String() string { return fmt.Sprint(*h) }

func (h *headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q is not K:V", v)
	}
	*h = append(*h, [2]string{strings.TrimSpace(k), strings.TrimSpace(val)})
	return nil
}

func queryOf(target string) url.Values {
	u, err := url.Parse(target)
	if err != nil {
		return nil
	}
	return u.Query()
}

// chatMessage, when its conversation is set, makes the sample event a chat
// message: what the example agent (examples/agent) reads.
type chatMessage struct{ conversation, text string }

// sampleEvent builds a small event whose id sits where the source's first
// event id template looks for it.
func sampleEvent(req *signatures.Request, templates []string, id string, now time.Time, chat chatMessage) error {
	if len(templates) == 0 {
		return usageError{"this source has no event id template; pass --body FILE"}
	}
	t := templates[0]
	parts := placeholder.FindAllStringSubmatch(t, -1)
	if len(parts) == 0 {
		return usageError{fmt.Sprintf("event id template %q reads nothing from the request; pass --body FILE", t)}
	}
	doc := map[string]any{"type": "replyonce.test", "created": now.Unix(), "message": "test event from gateway send"}
	if chat.conversation != "" {
		if len(parts) > 1 || parts[0][1] == "form" {
			return usageError{"--conversation makes a JSON chat event with the id in one field; this source needs another shape, pass --body FILE"}
		}
		text := chat.text
		if text == "" {
			text = "Hello from gateway send"
		}
		doc = map[string]any{"type": "message.created", "created": now.Unix(),
			"conversation_id": chat.conversation, "message_id": id, "text": text}
	}
	// Every field the template reads is filled: the first with the event id,
	// the others of a composite id with fixed test values.
	var form url.Values
	for i, p := range parts {
		kind, name, v := p[1], p[2], id
		if i > 0 {
			v = "test" + strconv.Itoa(i)
		}
		switch kind {
		case "header":
			req.Header.Set(name, v)
		case "json":
			setPath(doc, name, v)
		case "form":
			if form == nil {
				form = url.Values{"MessageSid": {id}, "Body": {"test event from gateway send"}}
			}
			form.Set(name, v)
		default:
			return usageError{fmt.Sprintf("event id template %q reads %s; pass --body FILE", t, kind)}
		}
	}
	if form != nil {
		if strings.Contains(t, "{json:") {
			return usageError{fmt.Sprintf("event id template %q reads both form fields and JSON; pass --body FILE", t)}
		}
		req.Body = []byte(form.Encode())
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return nil
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	req.Body = b
	req.Header.Set("Content-Type", "application/json")
	return nil
}

// placeholder matches one "{kind:name}" of an event id template.
var placeholder = regexp.MustCompile(`\{([a-z]+):([^{}]+)\}`)

// singlePlaceholder splits "{kind:name}".
func singlePlaceholder(t string) (kind, name string, ok bool) {
	if !strings.HasPrefix(t, "{") || !strings.HasSuffix(t, "}") || strings.Count(t, "{") != 1 {
		return "", "", false
	}
	kind, name, ok = strings.Cut(t[1:len(t)-1], ":")
	return kind, name, ok && name != ""
}

// setPath puts v at a dotted path, creating objects on the way.
func setPath(doc map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := doc[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[p] = next
		}
		doc = next
	}
	doc[parts[len(parts)-1]] = v
}
