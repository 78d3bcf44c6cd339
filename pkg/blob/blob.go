// Package blob is the platform's blob store: named byte objects (the
// consumption reports' CSVs). Dir keeps them in a directory (`runway dev`:
// DATA-DIR/blobs); S3 keeps them in a bucket of an S3-compatible store
// (a cluster: `runway serve metrics --blob-s3-endpoint ...`), through
// minio-go.
//
// Both run the same contract tests (contract_test.go). S3's run against a
// real server on 127.0.0.1: Versity Gateway (github.com/versity/versitygw,
// Apache-2.0) with its posix backend, built from the Go module proxy as
// bin/versitygw (make/testbin.mk), over TLS with SigV4 credentials. MinIO's
// server is not used: it is under the AGPL.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Store keeps objects by key.
type Store interface {
	// Put writes the object at key whole (a reader never sees half of it).
	Put(ctx context.Context, key string, data []byte) error
	// Get reads the object at key, of at most max bytes: ErrNotFound when
	// there is none, ErrTooLarge (with its size) for a larger one, found
	// before anything is read, so stored data never makes the reader
	// allocate more than max.
	Get(ctx context.Context, key string, max int64) ([]byte, error)
	// Delete removes the object at key; none is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys that start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// ErrNotFound: no object at the key.
var ErrNotFound = errors.New("blob: not found")

// ErrTooLarge: the object is larger than the reader takes.
var ErrTooLarge = errors.New("blob: object too large")

// readAtMost reads r, of size bytes as the store says, unless it is larger
// than max, reading no more than max+1 bytes in case it grew meanwhile.
func readAtMost(r io.Reader, key string, size, max int64) ([]byte, error) {
	if size > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrTooLarge, key, size, max)
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("blob: read %s: %w", key, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s is more than %d bytes", ErrTooLarge, key, max)
	}
	return b, nil
}

// keyPattern is what keys may be: path segments of [a-z0-9._-], so a key
// cannot leave the store's directory.
var keyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$`)

// Dir is a Store in a directory.
type Dir struct{ root string }

// NewDir keeps objects under root (created if missing).
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	return &Dir{root: root}, nil
}

// checkKey refuses what is not a key.
func checkKey(key string) error {
	if len(key) > 512 || !keyPattern.MatchString(key) {
		return fmt.Errorf("blob: invalid key %q", key)
	}
	return nil
}

func (d *Dir) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put writes to a temporary file, syncs it and renames it into place.
func (d *Dir) Put(_ context.Context, key string, data []byte) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("blob: write %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("blob: sync %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	return nil
}

// Get reads the file at key.
func (d *Dir) Get(_ context.Context, key string, max int64) ([]byte, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	return readAtMost(f, key, st.Size(), max)
}

// Delete removes the file at key.
func (d *Dir) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob: %w", err)
	}
	return nil
}

// List walks the directory; Put's temporary files are not keys.
func (d *Dir) List(_ context.Context, prefix string) ([]string, error) {
	var keys []string
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
	}
	sort.Strings(keys)
	return keys, nil
}
