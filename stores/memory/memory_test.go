package memory_test

import (
	"testing"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) ledger.Store { return memory.New(nil) })
}

func BenchmarkOnce(b *testing.B) { storetest.BenchmarkOnce(b, memory.New(nil)) }

func BenchmarkEnqueueBacklog(b *testing.B) { storetest.BenchmarkEnqueueBacklog(b, memory.New(nil)) }

func BenchmarkLongScope(b *testing.B) { storetest.BenchmarkLongScope(b, memory.New(nil)) }
