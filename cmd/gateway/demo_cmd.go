package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/replyonce/gateway/cmd/gateway/internal/demo"
)

// demo runs the chaos demo: simulated support conversations under injected
// faults, once without the gateway and once through it, on simulated time.
// It fails when a single duplicate reply gets through with the gateway, so
// CI can run it as a check.
func (a *App) demo(ctx context.Context, args []string) error {
	fs := a.flags("demo")
	seed := fs.Uint64("seed", demo.DefaultSeed, "seed for the injected faults; one seed always prints the same report")
	conversations := fs.Int("conversations", demo.DefaultConversations, "number of simulated support conversations")
	store := fs.String("store", "memory", "ledger store for the run with the gateway: memory or bolt")
	storePath := fs.String("store-path", "", "bolt file to create and keep (default: a temporary one, removed afterwards)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *conversations < 1 {
		return usageError{fmt.Sprintf("demo: --conversations must be at least 1, got %d", *conversations)}
	}
	if !slices.Contains(demo.StoreKinds(), *store) {
		return usageError{fmt.Sprintf("demo: --store %q: want %s", *store, strings.Join(demo.StoreKinds(), " or "))}
	}
	if *storePath != "" && *store != "bolt" {
		return usageError{"demo: --store-path needs --store bolt"}
	}
	rep, err := demo.Run(ctx, demo.Config{Seed: *seed, Conversations: *conversations, Store: *store, StorePath: *storePath})
	if err != nil {
		return err
	}
	lookup := a.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := rep.Write(a.Stdout, demo.Colour(a.Stdout, lookup)); err != nil {
		return err
	}
	if n := rep.With.Duplicates; n > 0 {
		return fmt.Errorf("demo: %d duplicate replies got through with the gateway", n)
	}
	return nil
}
