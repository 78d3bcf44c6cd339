package blob_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/blob"
	"github.com/runwayhq/runway/pkg/blob/s3test"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
)

func TestS3Contract(t *testing.T) {
	srv := s3test.Start(t)
	s, err := blob.NewS3(t.Context(), blob.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket,
		AccessKeyFile: srv.AccessKeyFile, SecretKeyFile: srv.SecretKeyFile, CAFile: srv.CA})
	if err != nil {
		t.Fatal(err)
	}
	contract(t, s)
}

// TestS3Refuses: what NewS3 must not accept, each against the real server
// where it takes one.
func TestS3Refuses(t *testing.T) {
	srv := s3test.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	good := blob.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, CAFile: srv.CA}
	if _, err := blob.NewS3(t.Context(), good); err != nil {
		t.Fatalf("credentials from the environment: %v", err)
	}
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("not-the-secret"), 0o600)
	access := srv.AccessKeyFile
	for name, c := range map[string]func(*blob.S3Config){
		"wrong secret": func(c *blob.S3Config) { c.AccessKeyFile, c.SecretKeyFile = access, wrong },
		"one key file": func(c *blob.S3Config) { c.AccessKeyFile = access },
		"an empty key file": func(c *blob.S3Config) {
			c.AccessKeyFile, c.SecretKeyFile = access, filepath.Join(dir, "empty")
			os.WriteFile(c.SecretKeyFile, nil, 0o600)
		},
		"missing bucket":       func(c *blob.S3Config) { c.Bucket = "nope" },
		"no bucket":            func(c *blob.S3Config) { c.Bucket = "" },
		"CA that did not sign": func(c *blob.S3Config) { c.CAFile = tlstest.New(t).CA },
		"system roots":         func(c *blob.S3Config) { c.CAFile = "" },
		"plain http off loopback": func(c *blob.S3Config) {
			c.Endpoint = "http://192.0.2.1:9000"
		},
		"endpoint with a path": func(c *blob.S3Config) { c.Endpoint += "/bucket" },
		"no scheme":            func(c *blob.S3Config) { c.Endpoint = strings.TrimPrefix(c.Endpoint, "https://") },
	} {
		cfg := good
		c(&cfg)
		if _, err := blob.NewS3(t.Context(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if _, err := blob.NewS3(t.Context(), good); err == nil {
		t.Error("no credentials at all: accepted")
	}
}
