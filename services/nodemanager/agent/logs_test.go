package agent

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTailOffset(t *testing.T) {
	tests := []struct {
		content string
		n       int
		want    string
	}{
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\nc", 2, "b\nc"},
		{"", 3, ""},
		{"\n\n", 1, "\n"},
		{strings.Repeat("x", 70<<10) + "\nlast\n", 1, "last\n"}, // across read blocks
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		off, err := tailOffset(f, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f)
		f.Close()
		if string(got) != tc.want {
			t.Errorf("last %d lines of %q = %q, want %q", tc.n, trim(tc.content), trim(string(got)), trim(tc.want))
		}
	}
}

func trim(s string) string {
	if len(s) > 20 {
		return s[:8] + "…" + s[len(s)-8:]
	}
	return s
}
