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

// The kubelet's CRI lines come back as the container's text, whatever
// read splits them: a P line is continued by the next, stdout and stderr
// interleave, a line not in the format goes as is.
func TestCRIText(t *testing.T) {
	in := "2026-12-01T10:00:00.1Z stdout P step 1 \n" +
		"2026-12-01T10:00:00.2Z stdout F of 10\n" +
		"2026-12-01T10:00:00.3Z stderr F warning: slow\n" +
		"2026-12-01T10:00:00.4Z stdout F\n" +
		"not a CRI line\n" +
		"2026-12-01T10:00:00.5Z stdout F last"
	want := "step 1 of 10\nwarning: slow\n\nnot a CRI line\n"
	for _, size := range []int{1, 7, 64, len(in)} {
		var c criText
		var got []byte
		for b := []byte(in); len(b) > 0; b = b[min(size, len(b)):] {
			got = append(got, c.decode(b[:min(size, len(b))])...)
		}
		if string(got) != want {
			t.Errorf("reads of %d bytes: %q, want %q", size, got, want)
		}
		if string(c.rest) != "2026-12-01T10:00:00.5Z stdout F last" {
			t.Errorf("reads of %d bytes: held %q, want the unfinished last line", size, c.rest)
		}
	}
}
