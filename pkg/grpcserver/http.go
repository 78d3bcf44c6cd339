package grpcserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/runwayhq/runway/pkg/apierr"
)

// routes splits the one listener's traffic: gRPC (HTTP/2 with an
// application/grpc content type) to the gRPC server, the rest to the small
// HTTP mux in front of the gateway.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", s.serveOpenAPI)
	mux.HandleFunc("GET /healthz", s.serveHealthz)
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	} else {
		// Metrics live on the operations listener: a scraper pointed here
		// gets a plain 404, not the UI's page.
		mux.Handle("/metrics", http.NotFoundHandler())
	}
	if s.cfg.UI != nil {
		mux.Handle("/v1/", s.gwMux)
		mux.Handle("/", s.cfg.UI)
	} else {
		mux.Handle("/", s.gwMux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			s.grpc.ServeHTTP(w, r)
			return
		}
		if !s.boundBody(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// boundBody reads a REST body of at most MaxMessageBytes within
// BodyTimeout, answering 413 with the limit for a longer one (before the
// gateway would decode it whole) and 408 for a client too slow to send it;
// it reports whether the call may go on.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	limit := int64(s.cfg.MaxMessageBytes)
	var body []byte
	var err error
	if r.ContentLength <= limit {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		_ = rc.SetReadDeadline(time.Time{})
	}
	var tooLarge *http.MaxBytesError
	if r.ContentLength > limit || errors.As(err, &tooLarge) {
		st := apierr.ToStatus(apierr.InvalidField("body", fmt.Sprintf("is larger than %d bytes", limit)), "runway.dev")
		b, _ := protojson.Marshal(st.Proto())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = w.Write(b)
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("the request body did not arrive within %s", s.cfg.BodyTimeout), http.StatusRequestTimeout)
		return false
	}
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if len(s.cfg.OpenAPI) == 0 {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.cfg.OpenAPI)
}

// serveHealthz is the plain-HTTP liveness/readiness probe: 200 while
// serving, 503 once shutdown has begun. Per-service status is gRPC health.
func (s *Server) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shutting down\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// newGatewayMux keeps the gateway's default error handler (the body is the
// google.rpc.Status: code, message, details) and its default HTTP codes, and
// adds the request id both ways. Authorization is forwarded as the
// `authorization` metadata by the gateway itself.
func newGatewayMux(opts ...runtime.ServeMuxOption) *runtime.ServeMux {
	return runtime.NewServeMux(append([]runtime.ServeMuxOption{
		runtime.WithIncomingHeaderMatcher(func(key string) (string, bool) {
			if strings.EqualFold(key, RequestIDHeader) {
				return RequestIDHeader, true
			}
			return runtime.DefaultHeaderMatcher(key)
		}),
		runtime.WithOutgoingHeaderMatcher(func(key string) (string, bool) {
			if key == RequestIDHeader {
				return http.CanonicalHeaderKey(RequestIDHeader), true
			}
			return runtime.MetadataHeaderPrefix + key, true // the default
		}),
	}, opts...)...)
}
