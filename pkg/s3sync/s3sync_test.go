package s3sync_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/runwayhq/runway/pkg/blob/s3test"
	"github.com/runwayhq/runway/pkg/s3sync"
)

func bucket(t *testing.T, s s3test.Server) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The prefix's objects land in the directory at their keys less the
// prefix (others' stay out); the way back puts regular files under the
// prefix and never what a link points to; wrong keys fail.
func TestDownloadAndUpload(t *testing.T) {
	srv := s3test.StartHTTP(t)
	c := bucket(t, srv)
	for key, body := range map[string]string{"train/a.txt": "alpha\n", "train/sub/b.txt": "beta\n", "other/c.txt": "not mine\n"} {
		if _, err := c.PutObject(t.Context(), srv.Bucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src := s3sync.Source{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: "train/", AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	dir := filepath.Join(t.TempDir(), "data")
	n, err := s3sync.Download(t.Context(), src, dir)
	if err != nil || n != 2 {
		t.Fatalf("download: %d, %v", n, err)
	}
	for p, want := range map[string]string{"a.txt": "alpha\n", "sub/b.txt": "beta\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != want {
			t.Errorf("%s: %q, want %q", p, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "c.txt")); err == nil {
		t.Error("an object outside the prefix was copied")
	}

	secret := filepath.Join(t.TempDir(), "node-secret")
	if err := os.WriteFile(secret, []byte("node-only"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "result.txt"), []byte("written by the pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "leak")); err != nil {
		t.Fatal(err)
	}
	if n, err := s3sync.Upload(t.Context(), src, dir); err != nil || n != 3 {
		t.Fatalf("upload: %d, %v", n, err)
	}
	obj, err := c.GetObject(t.Context(), srv.Bucket, "train/result.txt", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(obj); !bytes.Equal(b, []byte("written by the pod\n")) {
		t.Errorf("train/result.txt: %q", b)
	}
	if _, err := c.StatObject(t.Context(), srv.Bucket, "train/leak", minio.StatObjectOptions{}); err == nil {
		t.Error("a link to a node file was uploaded")
	}

	bad := src
	bad.SecretAccessKey = "wrong"
	if _, err := s3sync.Download(t.Context(), bad, filepath.Join(t.TempDir(), "d")); err == nil {
		t.Error("a download with a wrong key worked")
	}
}
