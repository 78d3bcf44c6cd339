package blob_test

import (
	"errors"
	"testing"

	"github.com/runwayhq/runway/pkg/blob"
)

func TestDir(t *testing.T) {
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := d.Put(ctx, "reports/r1.csv", []byte("a,b\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := d.Get(ctx, "reports/r1.csv"); err != nil || string(b) != "a,b\n" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if err := d.Delete(ctx, "reports/r1.csv"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, "reports/r1.csv"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../b", "", "A"} {
		if err := d.Put(ctx, bad, nil); err == nil {
			t.Errorf("Put(%q) accepted", bad)
		}
	}
}
