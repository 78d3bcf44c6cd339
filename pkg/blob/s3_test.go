package blob_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/runwayhq/runway/pkg/blob"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
)

const (
	testAccess = "runway-test"
	testSecret = "runway-test-secret-key"
)

// s3Server is bin/versitygw serving a posix directory over TLS on
// 127.0.0.1, with one bucket.
type s3Server struct {
	endpoint, ca, bucket string
}

func startS3(t *testing.T) s3Server {
	t.Helper()
	bin, _ := filepath.Abs("../../bin/versitygw")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (make bin/versitygw builds it)", bin, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	certs := tlstest.New(t)
	data, side := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "--port", addr, "--access", testAccess, "--secret", testSecret,
		"--cert", certs.Cert, "--key", certs.Key, "posix", "--sidecar", side, data)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("versitygw:\n%s", log.String())
		}
	})
	s := s3Server{endpoint: "https://" + addr, ca: certs.CA, bucket: "runway-reports"}
	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(testAccess, testSecret, ""), Secure: true,
		Transport: caTransport(t, certs.CA), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err = c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{})
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw at %s: make bucket: %v\n%s", addr, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestS3Contract(t *testing.T) {
	srv := startS3(t)
	dir := t.TempDir()
	accessFile, secretFile := filepath.Join(dir, "access-key"), filepath.Join(dir, "secret-key")
	os.WriteFile(accessFile, []byte(testAccess+"\n"), 0o600)
	os.WriteFile(secretFile, []byte(testSecret+"\n"), 0o600)
	s, err := blob.NewS3(t.Context(), blob.S3Config{Endpoint: srv.endpoint, Bucket: srv.bucket,
		AccessKeyFile: accessFile, SecretKeyFile: secretFile, CAFile: srv.ca})
	if err != nil {
		t.Fatal(err)
	}
	contract(t, s)
}

// TestS3Refuses: what NewS3 must not accept, each against the real server
// where it takes one.
func TestS3Refuses(t *testing.T) {
	srv := startS3(t)
	t.Setenv("AWS_ACCESS_KEY_ID", testAccess)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecret)
	good := blob.S3Config{Endpoint: srv.endpoint, Bucket: srv.bucket, CAFile: srv.ca}
	if _, err := blob.NewS3(t.Context(), good); err != nil {
		t.Fatalf("credentials from the environment: %v", err)
	}
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("not-the-secret"), 0o600)
	access := filepath.Join(dir, "access")
	os.WriteFile(access, []byte(testAccess), 0o600)
	for name, c := range map[string]func(*blob.S3Config){
		"wrong secret":         func(c *blob.S3Config) { c.AccessKeyFile, c.SecretKeyFile = access, wrong },
		"one key file":         func(c *blob.S3Config) { c.AccessKeyFile = access },
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

func caTransport(t *testing.T, caFile string) *http.Transport {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return tr
}
