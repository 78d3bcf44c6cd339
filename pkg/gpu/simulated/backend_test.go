package simulated_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/gpu/simulated"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackend_Devices(t *testing.T) {
	b := simulated.New(simulated.Config{Count: 2, Model: "Sim A100", MemoryBytes: 40 << 30, Node: "n1"})
	got, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d devices, want 2", len(got))
	}
	for i, d := range got {
		if d.Index != i || d.Model != "Sim A100" || d.MemoryBytes != 40<<30 || d.MIG {
			t.Errorf("device %d = %+v", i, d)
		}
	}
	if got[0].UUID == got[1].UUID {
		t.Errorf("devices share UUID %q", got[0].UUID)
	}
	got[0].Model = "changed"
	again, _ := b.Devices()
	if again[0].Model != "Sim A100" {
		t.Error("Devices returned the backend's own slice")
	}
}

func TestBackend_defaults(t *testing.T) {
	got, _ := simulated.New(simulated.Config{Count: 1}).Devices()
	if got[0].Model != simulated.DefaultModel || got[0].MemoryBytes != simulated.DefaultMemoryBytes {
		t.Errorf("device = %+v, want the defaults", got[0])
	}
}
