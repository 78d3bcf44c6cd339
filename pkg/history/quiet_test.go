package history_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/history"
)

// The TSDB's own INFO lines (its WAL replay on every open) are logged at
// DEBUG: an INFO logger prints none of them, a DEBUG logger all, and
// nothing of the TSDB's is lost.
func TestTSDBInfoLinesAtDebug(t *testing.T) {
	dir := t.TempDir()
	lines := func(level slog.Level) string {
		var buf bytes.Buffer
		s, err := history.Open(history.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if out := lines(slog.LevelInfo); strings.Contains(out, "component=tsdb") {
		t.Errorf("an INFO logger printed the TSDB's lines:\n%s", out)
	}
	out := lines(slog.LevelDebug)
	if !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "component=tsdb") || !strings.Contains(out, "WAL") {
		t.Errorf("a DEBUG logger did not print the TSDB's WAL replay at DEBUG:\n%s", out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "component=tsdb") && strings.Contains(line, "level=INFO") {
			t.Errorf("a TSDB line at INFO: %s", line)
		}
	}
}
