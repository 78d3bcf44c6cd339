package blob_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/blob"
)

func TestDirContract(t *testing.T) {
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	contract(t, d)
}

// contract is what every Store must do; Dir and S3 both run it.
func contract(t *testing.T, s blob.Store) {
	t.Helper()
	ctx := t.Context()
	if keys, err := s.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("List of an empty store = %q, %v", keys, err)
	}
	if _, err := s.Get(ctx, "reports/missing.csv", 1<<20); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "reports/missing.csv"); err != nil {
		t.Errorf("Delete of a missing key: %v, want nil", err)
	}
	for _, kv := range [][2]string{{"reports/r2.csv", "r2\n"}, {"reports/r1.csv", "a,b\n"}, {"other/x", "x"}, {"reports/r1.csv", "a,b\n1,2\n"}} {
		if err := s.Put(ctx, kv[0], []byte(kv[1])); err != nil {
			t.Fatalf("Put(%s): %v", kv[0], err)
		}
	}
	if b, err := s.Get(ctx, "reports/r1.csv", 1<<20); err != nil || string(b) != "a,b\n1,2\n" {
		t.Errorf("Get after overwrite = %q, %v; want the second write", b, err)
	}
	if keys, err := s.List(ctx, "reports/"); err != nil || !slices.Equal(keys, []string{"reports/r1.csv", "reports/r2.csv"}) {
		t.Errorf("List(reports/) = %q, %v", keys, err)
	}
	if keys, err := s.List(ctx, ""); err != nil || !slices.Equal(keys, []string{"other/x", "reports/r1.csv", "reports/r2.csv"}) {
		t.Errorf("List() = %q, %v", keys, err)
	}
	if err := s.Delete(ctx, "reports/r1.csv"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "reports/r1.csv", 1<<20); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if keys, err := s.List(ctx, "reports/"); err != nil || !slices.Equal(keys, []string{"reports/r2.csv"}) {
		t.Errorf("List after Delete = %q, %v", keys, err)
	}
	// Larger than minio-go's 16 MiB part: S3 takes it as a multipart upload.
	big := make([]byte, 20<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "reports/big.csv", big); err != nil {
		t.Fatalf("Put of 20 MiB: %v", err)
	}
	if b, err := s.Get(ctx, "reports/big.csv", int64(len(big))); err != nil || !bytes.Equal(b, big) {
		t.Errorf("Get of 20 MiB: %d bytes, equal %v, %v", len(b), bytes.Equal(b, big), err)
	}
	// A reader that takes less is refused before the object is read.
	if b, err := s.Get(ctx, "reports/big.csv", int64(len(big))-1); !errors.Is(err, blob.ErrTooLarge) || b != nil ||
		!strings.Contains(err.Error(), fmt.Sprint(len(big))) {
		t.Errorf("Get of 20 MiB with a limit a byte short: %d bytes, %v; want ErrTooLarge with its size", len(b), err)
	}
	if err := s.Put(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(ctx, "empty", 0); err != nil || len(b) != 0 {
		t.Errorf("Get of an empty object = %q, %v", b, err)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../b", "", "A", "a//b"} {
		if err := s.Put(ctx, bad, nil); err == nil {
			t.Errorf("Put(%q) accepted", bad)
		}
		if _, err := s.Get(ctx, bad, 1<<20); err == nil || errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want an invalid key", bad, err)
		}
	}
}
