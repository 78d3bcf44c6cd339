// Package s3sync copies an s3 data source's objects for a pod: every
// object under the prefix into a directory before the pod starts, and, for
// a read-write data source, the directory's files back under the prefix
// after the pod exits 0 (the node agent's steps; the runtime binds the
// directory at the data source's mount path). It is a sync, not a mount:
// what the pod writes reaches the bucket only on a clean exit, and a file
// it deletes is not deleted from the bucket.
//
// What it holds to, since the endpoint, bucket and prefix come from a
// tenant and the directory is the pod's: an object whose key would land
// outside the directory (.., an absolute path) is refused; the way back
// reads regular files only, opened without following a link, so that a
// link the pod left to a node file never uploads the node's file. Bounded
// by MaxObjects, MaxBytes and Timeout.
package s3sync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Bounds of one sync, each way.
const (
	MaxObjects = 100_000
	MaxBytes   = 64 << 30
	Timeout    = 30 * time.Minute
)

// Source is a bucket prefix and how to reach it.
type Source struct {
	Endpoint, Bucket, Prefix     string
	AccessKeyID, SecretAccessKey string // both empty: anonymous
}

func (s Source) client() (*minio.Client, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("s3 endpoint %q is not http(s)://HOST[:PORT]", s.Endpoint)
	}
	var creds *credentials.Credentials
	if s.AccessKeyID != "" {
		creds = credentials.NewStaticV4(s.AccessKeyID, s.SecretAccessKey, "")
	} else {
		creds = credentials.New(&credentials.Static{Value: credentials.Value{SignerType: credentials.SignatureAnonymous}})
	}
	return minio.New(u.Host, &minio.Options{Creds: creds, Secure: u.Scheme == "https", BucketLookup: minio.BucketLookupPath})
}

// Download copies every object under the prefix into dir (made 0700 when
// absent), at its key less the prefix; it returns how many.
func Download(ctx context.Context, s Source, dir string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	c, err := s.client()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	n, total := 0, int64(0)
	for obj := range c.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: s.Prefix, Recursive: true}) {
		if obj.Err != nil {
			return n, fmt.Errorf("list s3://%s/%s: %w", s.Bucket, s.Prefix, obj.Err)
		}
		rel := strings.TrimPrefix(obj.Key, s.Prefix)
		if strings.HasSuffix(rel, "/") && obj.Size == 0 {
			continue // a folder marker
		}
		if rel == "" || path.IsAbs(rel) || !filepath.IsLocal(rel) {
			return n, fmt.Errorf("object %q would land outside the mount", obj.Key)
		}
		if n++; n > MaxObjects {
			return n, fmt.Errorf("s3://%s/%s holds more than %d objects", s.Bucket, s.Prefix, MaxObjects)
		}
		if total += obj.Size; total > MaxBytes {
			return n, fmt.Errorf("s3://%s/%s holds more than %d bytes", s.Bucket, s.Prefix, int64(MaxBytes))
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return n, err
		}
		if err := c.FGetObject(ctx, s.Bucket, obj.Key, dst, minio.GetObjectOptions{}); err != nil {
			return n, fmt.Errorf("get s3://%s/%s: %w", s.Bucket, obj.Key, err)
		}
	}
	return n, nil
}

// Upload puts every regular file under dir at the prefix plus its path
// (links and other files skipped); it returns how many.
func Upload(ctx context.Context, s Source, dir string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	c, err := s.client()
	if err != nil {
		return 0, err
	}
	n, total := 0, int64(0)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return err
		}
		if n++; n > MaxObjects {
			return fmt.Errorf("more than %d files", MaxObjects)
		}
		if total += st.Size(); total > MaxBytes {
			return fmt.Errorf("more than %d bytes", int64(MaxBytes))
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		key := s.Prefix + filepath.ToSlash(rel)
		if _, err := c.PutObject(ctx, s.Bucket, key, io.LimitReader(f, st.Size()), st.Size(), minio.PutObjectOptions{}); err != nil {
			return fmt.Errorf("put s3://%s/%s: %w", s.Bucket, key, err)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return n, err
	}
	return n, nil
}
