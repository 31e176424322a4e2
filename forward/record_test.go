package forward

import (
	"encoding/json"
	"testing"
)

// The record's JSON is what the ledger already holds from earlier
// versions: these exact bytes must keep reading and writing the same.
func TestRecordJSONIsStable(t *testing.T) {
	for _, c := range []struct {
		rec  Record
		want string
	}{
		{RecordOf(Outcome{Kind: Rejected, Status: 422}), `{"outcome":"rejected","agentStatus":422}`},
		{Record{Outcome: "delivered", AgentStatus: 200, Delivery: 2, Answer: &KeptAnswer{Status: 200, ContentType: "text/xml", Body: []byte("<R/>")}},
			`{"outcome":"delivered","agentStatus":200,"delivery":2,"answer":{"status":200,"contentType":"text/xml","body":"PFIvPg=="}}`},
		{Record{Outcome: "delivered", AgentStatus: 200, Answer: &KeptAnswer{Status: 200, NotKept: "too_large"}},
			`{"outcome":"delivered","agentStatus":200,"answer":{"status":200,"notKept":"too_large"}}`},
	} {
		b, err := json.Marshal(c.rec)
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal = %s, %v; want %s", b, err, c.want)
		}
		var back Record
		if err := json.Unmarshal([]byte(c.want), &back); err != nil {
			t.Fatal(err)
		}
		if b2, _ := json.Marshal(back); string(b2) != c.want {
			t.Errorf("read back and written again: %s, want %s", b2, c.want)
		}
	}
}
