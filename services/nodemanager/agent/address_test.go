package agent

import (
	"os"
	"testing"
)

func TestAdvertised(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ advertise, listening, want string }{
		{"", "127.0.0.1:9000", "127.0.0.1:9000"},
		{"", "[::]:9000", host + ":9000"},
		{"", "0.0.0.0:9000", host + ":9000"},
		{"10.0.0.7", "[::]:9000", "10.0.0.7:9000"},
		{"gpu-1.example.com:443", "[::]:9000", "gpu-1.example.com:443"},
		{"fd00::7", "[::]:9000", "[fd00::7]:9000"},
	} {
		got, err := advertised(tc.advertise, tc.listening)
		if err != nil || got != tc.want {
			t.Errorf("advertised(%q, %q) = %q, %v; want %q", tc.advertise, tc.listening, got, err, tc.want)
		}
	}
}
