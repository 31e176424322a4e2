package forward

// Record is what the ledger keeps of a delivery that came to an end: the
// value of its deliver entry, so that a duplicate is answered with the
// first delivery's outcome and an operator sees what the agent said
// (gateway ledger history: "rejected (agent 422)"). Inline and queued
// delivery record this one shape.
type Record struct {
	Outcome     string `json:"outcome"` // Delivered or Rejected, as Kind.String writes them
	AgentStatus int    `json:"agentStatus"`
	// Delivery is the run's delivery number that reached the agent
	// (inline mode; queued mode keeps it on the queue item).
	Delivery int `json:"delivery,omitempty"`
	// Answer is the agent's answer, kept when the source lets the agent
	// answer the provider (forward.respond: agent).
	Answer *KeptAnswer `json:"answer,omitempty"`
}

// RecordOf is the record of a forward whose outcome ended its delivery.
func RecordOf(out Outcome) Record {
	return Record{Outcome: out.Kind.String(), AgentStatus: out.Status}
}

// KeptAnswer is the agent's answer as a Record keeps it, so a duplicate
// hears what the first delivery heard. Only Content-Type is kept of its
// headers: the others (cookies, caching, the agent's own server headers)
// are the agent's business, not the provider's.
type KeptAnswer struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	Body        []byte `json:"body,omitempty"`
	// NotKept is set when the body was not kept (too_large, unread): the
	// provider then hears the gateway's JSON, first delivery and
	// duplicates alike.
	NotKept string `json:"notKept,omitempty"`
}
