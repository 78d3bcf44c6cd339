package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// untilSignal is a context that ends at the first SIGINT or SIGTERM; a
// second one kills the process the default way.
func untilSignal(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
