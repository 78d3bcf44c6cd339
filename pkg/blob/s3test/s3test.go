// Package s3test runs a real S3 server for tests: Versity Gateway
// (github.com/versity/versitygw, Apache-2.0), built from the Go module
// proxy as bin/versitygw by make/testbin.mk, serving a posix directory
// over TLS on 127.0.0.1 with SigV4 credentials and one bucket.
package s3test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
)

// Server is a running gateway and how to reach it.
type Server struct {
	// Endpoint is https://127.0.0.1:PORT; CA the PEM file its certificate
	// chains to.
	Endpoint, CA string
	// Bucket exists and is empty.
	Bucket string
	// AccessKey and SecretKey are its root credentials; AccessKeyFile and
	// SecretKeyFile hold them.
	AccessKey, SecretKey         string
	AccessKeyFile, SecretKeyFile string
}

// Start runs bin/versitygw until t's cleanup and makes the bucket.
func Start(t testing.TB) Server {
	t.Helper()
	return start(t, true)
}

// StartHTTP is Start in plain http (Endpoint http://127.0.0.1:PORT, no
// CA): for clients that take no CA of their own, as a data source's sync.
func StartHTTP(t testing.TB) Server {
	t.Helper()
	return start(t, false)
}

func start(t testing.TB, secure bool) Server {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "versitygw")
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
	dir := t.TempDir()
	s := Server{Endpoint: "https://" + addr, CA: certs.CA, Bucket: "runway-reports",
		AccessKey: "runway-test", SecretKey: "runway-test-secret-key",
		AccessKeyFile: filepath.Join(dir, "access-key"), SecretKeyFile: filepath.Join(dir, "secret-key")}
	for f, v := range map[string]string{s.AccessKeyFile: s.AccessKey, s.SecretKeyFile: s.SecretKey} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data, side := filepath.Join(dir, "data"), filepath.Join(dir, "meta")
	for _, d := range []string{data, side} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--port", addr, "--access", s.AccessKey, "--secret", s.SecretKey}
	opts := &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), BucketLookup: minio.BucketLookupPath}
	if secure {
		args = append(args, "--cert", certs.Cert, "--key", certs.Key)
		opts.Secure, opts.Transport = true, transport(t, certs.CA)
	} else {
		s.Endpoint, s.CA = "http://"+addr, ""
	}
	cmd := exec.Command(bin, append(args, "posix", "--sidecar", side, data)...)
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
	c, err := minio.New(addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = c.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{})
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

func transport(t testing.TB, caFile string) *http.Transport {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr
}
