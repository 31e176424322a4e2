package redis

import (
	"testing"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest"
)

func TestConformance(t *testing.T) {
	c := testClient(t)
	storetest.Run(t, func(t *testing.T) ledger.Store {
		return New(c, Options{KeyPrefix: testPrefix(t, c)})
	})
}
