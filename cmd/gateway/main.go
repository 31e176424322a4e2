package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	// SIGINT and SIGTERM drain and stop on every platform: on Windows, Go
	// delivers Ctrl+C as SIGINT and a console's close, logoff or shutdown
	// event as SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	if sigs := reloadSignals(); len(sigs) > 0 { // Notify with none would relay every signal
		signal.Notify(hup, sigs...)
	}
	reload := make(chan struct{})
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case reload <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	app := &App{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, Clock: time.Now, Reload: reload}
	err := app.Run(ctx, os.Args[1:])
	stop()
	signal.Stop(hup)
	<-forwarded
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
