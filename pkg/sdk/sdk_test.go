package sdk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The config file holds the server and token; the environment wins field
// by field.
func TestFromEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runway", "config.json")
	t.Setenv(EnvConfig, path)
	t.Setenv(EnvServer, "")
	t.Setenv(EnvToken, "")
	if c := FromEnvironment(); c != (Config{}) {
		t.Errorf("no file, no environment: %+v", c)
	}
	if err := SaveConfig(Config{Server: "file:7070", Token: "file-token"}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %v, %v; want 0600 (it holds a token)", st.Mode().Perm(), err)
	}
	if c := FromEnvironment(); c != (Config{Server: "file:7070", Token: "file-token"}) {
		t.Errorf("from the file: %+v", c)
	}
	t.Setenv(EnvServer, "env:7070")
	if c := FromEnvironment(); c != (Config{Server: "env:7070", Token: "file-token"}) {
		t.Errorf("server from the environment, token from the file: %+v", c)
	}
	t.Setenv(EnvToken, "env-token")
	if c := FromEnvironment(); c != (Config{Server: "env:7070", Token: "env-token"}) {
		t.Errorf("both from the environment: %+v", c)
	}
}

func TestDialNeedsAServer(t *testing.T) {
	if _, err := Dial(t.Context(), Config{}); err == nil {
		t.Error("Dial with no server succeeded")
	}
}

// All follows page tokens to the last page and stops at the first error.
func TestAll(t *testing.T) {
	var tokens []string
	pages := func(fail bool) func(context.Context, string) (Page[int], error) {
		return func(_ context.Context, token string) (Page[int], error) {
			tokens = append(tokens, token)
			n, _ := strconv.Atoi(token)
			if fail && n == 4 {
				return Page[int]{}, errors.New("boom")
			}
			if n >= 6 {
				return Page[int]{Items: []int{n}}, nil
			}
			return Page[int]{Items: []int{n, n + 1}, Next: strconv.Itoa(n + 2)}, nil
		}
	}
	got, err := Collect(All(t.Context(), pages(false)))
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6}) || !slices.Equal(tokens, []string{"", "2", "4", "6"}) {
		t.Errorf("items %v, err %v, tokens %v", got, err, tokens)
	}
	got, err = Collect(All(t.Context(), pages(true)))
	if err == nil || !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("with a failing third page: items %v, err %v", got, err)
	}
	// Breaking out of the loop stops the paging.
	tokens = nil
	for v := range All(t.Context(), pages(false)) {
		if v == 1 {
			break
		}
	}
	if len(tokens) != 1 {
		t.Errorf("pages read after break: %v", tokens)
	}
}

func TestNames(t *testing.T) {
	if got := ID(WorkloadName("team-a", "a1")); got != "a1" {
		t.Errorf("ID = %q", got)
	}
	if got := ProjectOf(WorkloadName("team-a", "a1")); got != "team-a" {
		t.Errorf("ProjectOf = %q", got)
	}
	if got := ProjectOf("nodes/n1"); got != "" {
		t.Errorf("ProjectOf(nodes/n1) = %q", got)
	}
}

// A config without a refresh token, or with time left, is not refreshed (no
// call is made: the server does not exist).
func TestRefreshedOnlyNearExpiry(t *testing.T) {
	for _, c := range []Config{
		{Server: "127.0.0.1:1", Token: "t"},
		{Server: "127.0.0.1:1", Token: "t", RefreshToken: "r", Expiry: time.Now().Add(time.Hour)},
	} {
		got, changed, err := Refreshed(t.Context(), c)
		if err != nil || changed || got != c {
			t.Errorf("Refreshed(%+v) = %+v, %v, %v; want it unchanged", c, got, changed, err)
		}
	}
	if _, _, err := Refreshed(t.Context(), Config{Server: "127.0.0.1:1", Token: "t", RefreshToken: "r", Expiry: time.Now()}); err == nil {
		t.Error("a refresh against no server succeeded")
	}
}
