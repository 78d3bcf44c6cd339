package sdk

import (
	"strings"
	"testing"
)

// A server without https:// is dialled in plaintext, which carries the
// token and every answer in the clear: only to a loopback address, unless
// Insecure (RUNWAY_INSECURE=1) asks for it by name.
func TestDialPlaintextOnlyToLoopback(t *testing.T) {
	for _, server := range []string{"10.1.2.3:7070", "runway.example.com:7070", "http://runway.example.com:7070", "0.0.0.0:7070", ":7070"} {
		c, err := Dial(t.Context(), Config{Server: server, Token: "t"})
		if err == nil {
			c.Close()
			t.Errorf("Dial(%q) in plaintext succeeded", server)
			continue
		}
		if !strings.Contains(err.Error(), "https://") || !strings.Contains(err.Error(), EnvInsecure) {
			t.Errorf("Dial(%q): %v, want the way out (https:// or %s)", server, err, EnvInsecure)
		}
		c, err = Dial(t.Context(), Config{Server: server, Token: "t", Insecure: true})
		if err != nil {
			t.Errorf("Dial(%q) with Insecure: %v", server, err)
			continue
		}
		c.Close()
	}
	for _, server := range []string{"127.0.0.1:7070", "localhost:7070", "[::1]:7070", "http://127.0.0.1:7070", "https://runway.example.com"} {
		c, err := Dial(t.Context(), Config{Server: server, Token: "t"})
		if err != nil {
			t.Errorf("Dial(%q): %v", server, err)
			continue
		}
		c.Close()
	}
	t.Setenv(EnvConfig, t.TempDir()+"/none.json")
	t.Setenv(EnvInsecure, "1")
	if !FromEnvironment().Insecure {
		t.Errorf("%s=1: not Insecure", EnvInsecure)
	}
}
