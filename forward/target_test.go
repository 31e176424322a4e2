package forward

import (
	"reflect"
	"testing"
	"time"
)

// Every field of a Target reaches the request it starts.
func TestTargetRequestCarriesEveryField(t *testing.T) {
	tg := Target{URL: "https://agent.example/in", Timeout: 3 * time.Second, Headers: map[string]string{"Authorization": "Bearer t"},
		SigningSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	r := tg.Request()
	back := Target{URL: r.URL, Timeout: r.Timeout, Headers: r.StaticHeaders, SigningSecret: r.SigningSecret}
	if !reflect.DeepEqual(back, tg) {
		t.Fatalf("Request() = %+v, lost part of %+v", r, tg)
	}
	if n := reflect.TypeOf(Target{}).NumField(); n != 4 {
		t.Fatalf("Target has %d fields: make Request() carry the new one and check it here", n)
	}
}
