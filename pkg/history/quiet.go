package history

import (
	"context"
	"log/slog"
)

// internal is the log handler of the embedded TSDB's and query engine's
// own lines: their INFO lines (WAL replay, compaction, head GC) are about
// Prometheus's internals, not Runway's, so they go out at DEBUG, and a
// `runway dev` start prints Runway's own lines only. Warnings and errors
// keep their level.
type internal struct{ next slog.Handler }

func (h internal) demoted(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (h internal) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, h.demoted(l))
}

func (h internal) Handle(ctx context.Context, r slog.Record) error {
	r.Level = h.demoted(r.Level)
	return h.next.Handle(ctx, r)
}

func (h internal) WithAttrs(as []slog.Attr) slog.Handler { return internal{h.next.WithAttrs(as)} }
func (h internal) WithGroup(g string) slog.Handler       { return internal{h.next.WithGroup(g)} }

// internalLogger is log for a Prometheus component, its INFO lines at DEBUG.
func internalLogger(log *slog.Logger, component string) *slog.Logger {
	return slog.New(internal{log.Handler()}).With("component", component)
}
