package blob

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/runwayhq/runway/pkg/loopback"
)

// S3Config names a bucket of an S3-compatible store and how to reach it.
type S3Config struct {
	// Endpoint is the store's URL: https://HOST[:PORT]. http:// is accepted
	// only for a loopback host: objects and signed requests would otherwise
	// cross the network in clear.
	Endpoint string
	// Bucket holds the objects; it must exist.
	Bucket string
	// Region is the bucket's region (default us-east-1).
	Region string
	// AccessKeyFile and SecretKeyFile hold the credentials (a Kubernetes
	// Secret's keys mounted as files). Both empty: AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY from the environment.
	AccessKeyFile, SecretKeyFile string
	// CAFile is a PEM bundle the store's certificate chains to (default:
	// the system's roots).
	CAFile string
}

// S3 is a Store in a bucket. Keys are object names as they are.
type S3 struct {
	c      *minio.Client
	bucket string
}

// NewS3 connects to the store and checks that the bucket exists and the
// credentials may read it.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("blob: S3 endpoint %q is not https://HOST[:PORT]", cfg.Endpoint)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback.Host(u.Hostname()) {
			return nil, fmt.Errorf("blob: S3 endpoint %q: plain http only to a loopback address; use https", cfg.Endpoint)
		}
	default:
		return nil, fmt.Errorf("blob: S3 endpoint %q: scheme must be https", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("blob: S3 needs a bucket")
	}
	creds, err := s3Credentials(cfg)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("blob: S3 CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("blob: S3 CA %s holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: creds, Secure: u.Scheme == "https", Transport: tr,
		Region: region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return nil, fmt.Errorf("blob: S3 %s: %w", cfg.Endpoint, err)
	}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("blob: S3 %s bucket %q: %w", cfg.Endpoint, cfg.Bucket, err)
	}
	if !ok {
		return nil, fmt.Errorf("blob: S3 %s has no bucket %q", cfg.Endpoint, cfg.Bucket)
	}
	return &S3{c: c, bucket: cfg.Bucket}, nil
}

func s3Credentials(cfg S3Config) (*credentials.Credentials, error) {
	if cfg.AccessKeyFile == "" && cfg.SecretKeyFile == "" {
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
			return nil, errors.New("blob: S3 needs credentials: access and secret key files, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		return credentials.NewEnvAWS(), nil
	}
	if cfg.AccessKeyFile == "" || cfg.SecretKeyFile == "" {
		return nil, errors.New("blob: S3 needs both an access key file and a secret key file")
	}
	var keys [2]string
	for i, f := range []string{cfg.AccessKeyFile, cfg.SecretKeyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("blob: S3 credentials: %w", err)
		}
		if keys[i] = strings.TrimSpace(string(b)); keys[i] == "" {
			return nil, fmt.Errorf("blob: S3 credentials: %s is empty", f)
		}
	}
	return credentials.NewStaticV4(keys[0], keys[1], ""), nil
}

// Put uploads the object in one request (S3 makes it visible whole).
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("blob: put %s: %w", key, err)
	}
	return nil
}

// Get downloads the object, once its size (the GET's Content-Length) is
// known to be within max.
func (s *S3) Get(ctx context.Context, key string, max int64) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	o, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.err("get", key, err)
	}
	defer o.Close()
	info, err := o.Stat()
	if err != nil {
		return nil, s.err("get", key, err)
	}
	return readAtMost(o, key, info.Size, max)
}

// Delete removes the object (S3 answers a missing one with success).
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return s.err("delete", key, err)
	}
	return nil
}

// List pages through the bucket's objects under prefix (S3 lists them in
// key order).
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("blob: list %q: %w", prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys, nil
}

func (s *S3) err(op, key string, err error) error {
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return ErrNotFound
	}
	return fmt.Errorf("blob: %s %s: %w", op, key, err)
}
