package ingress

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/field"
)

// Who answers the provider (ForwardConfig.Respond).
const (
	RespondGateway = "gateway"
	RespondAgent   = "agent"
)

// Limits on an agent's answer passed back to the provider. The answer is
// stored in the deliver entry, inside the scope's document, for
// duplicates: the limit bounds what every later read of that document
// carries (base64, so 4/3 of the bytes).
const (
	DefaultRespondLimit = 64 << 10
	MaxRespondLimit     = 1 << 20
)

// Why an agent's 2xx answer was not kept (forward.KeptAnswer.NotKept).
const (
	answerTooLarge = "too_large"
	answerUnread   = "unread"
)

// checkRespond validates forward.respond and forward.respond_limit, their
// defaults filled in.
func checkRespond(f ForwardConfig, split, path string) error {
	switch f.Respond {
	case RespondGateway:
		if f.RespondLimit != 0 {
			return field.Errorf(path+".respond_limit", "applies only with forward.respond: agent")
		}
		return nil
	case RespondAgent:
	default:
		return field.Errorf(path+".respond", "%q is not one of gateway, agent", f.Respond)
	}
	if mode := f.Queue.Mode; mode != dispatch.ModeInline {
		return field.Errorf(path+".respond", "agent needs forward.mode: inline: a %s source answers the provider before the agent runs", mode)
	}
	if split != "" {
		return field.Errorf(path+".respond", "agent cannot answer a split batch: one request carries many events, each with its own answer")
	}
	if limit := f.RespondLimit; limit < 0 || limit > MaxRespondLimit {
		return field.Errorf(path+".respond_limit", "%d bytes: want 1 to %d (1MiB); the answer is stored with the event for its duplicates", limit, MaxRespondLimit)
	}
	return nil
}

// respondLimit is how much of the agent's answer is kept: 0 when the
// gateway answers the provider.
func (s *Source) respondLimit() int64 {
	if s.cfg.Forward.Respond != RespondAgent {
		return 0
	}
	return int64(s.cfg.Forward.RespondLimit)
}

// keptAnswer is what the deliver entry records of a delivered event's
// answer when the agent answers the provider.
func keptAnswer(src *Source, out forward.Outcome) *forward.KeptAnswer {
	if src.respondLimit() == 0 || out.Kind != forward.Delivered {
		return nil
	}
	a := &forward.KeptAnswer{Status: out.Status, ContentType: out.ContentType, Body: out.Body}
	switch {
	case errors.Is(out.BodyErr, forward.ErrAnswerTooLarge):
		a.NotKept, a.Body = answerTooLarge, nil
	case out.BodyErr != nil:
		a.NotKept, a.Body = answerUnread, nil
	}
	return a
}

// answerFromAgent writes the agent's kept answer for the provider. It
// reports false, writing nothing, when there is none to write: the
// source lets the gateway answer, the event was rejected or recorded
// before the source let the agent answer, or the answer was not kept (d
// then says why, for a warning in the log).
func answerFromAgent(c echo.Context, d *delivery, src *Source, a *forward.KeptAnswer) bool {
	if src.respondLimit() == 0 || a == nil {
		return false
	}
	if a.NotKept != "" {
		d.warn = true
		d.note = fmt.Sprintf("the agent's answer was not passed on (%s; forward.respond_limit is %d bytes): the provider hears the gateway's JSON", a.NotKept, src.respondLimit())
		return false
	}
	if a.ContentType != "" {
		c.Response().Header().Set(echo.HeaderContentType, a.ContentType)
	} else {
		// The agent sent none: net/http must not sniff one in its place.
		c.Response().Header()[echo.HeaderContentType] = nil
	}
	d.status = a.Status
	c.Response().WriteHeader(a.Status)
	if bodyAllowed(a.Status) && c.Request().Method != http.MethodHead {
		// A failed write means the provider is gone; the log line says
		// the answer was not sent.
		_, _ = c.Response().Write(a.Body)
	}
	return true
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusResetContent && status != http.StatusNotModified
}

// notKept is the gateway JSON's agent_answer field: why the agent's
// answer was not passed on, if it was not.
func notKept(a *forward.KeptAnswer) string {
	if a == nil {
		return ""
	}
	return a.NotKept
}
