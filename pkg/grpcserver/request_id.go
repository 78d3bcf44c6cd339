package grpcserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"google.golang.org/grpc/metadata"
)

// RequestIDHeader is the metadata key (and, as X-Request-Id, the HTTP
// header) that carries the request id both ways.
const RequestIDHeader = "x-request-id"

// call is what the outermost interceptor shares with the ones inside it: the
// request id is chosen by the second interceptor but the first (recover)
// needs it to report a panic.
type call struct {
	requestID string
	peer      string // the client's address (peer.go)
}

type callKey struct{}

func withCall(ctx context.Context) (context.Context, *call) {
	c := &call{}
	return context.WithValue(ctx, callKey{}, c), c
}

// RequestID is the id of the call ctx belongs to ("" outside a call served
// by this package). Services put it in their own log lines and pass it on
// as `x-request-id` metadata when they call another service.
func RequestID(ctx context.Context) string {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return c.requestID
	}
	return ""
}

// requestID takes the caller's id when it is a plausible one (at most 128
// characters of [A-Za-z0-9._:-], so it is safe in logs and headers) or makes
// a new one.
func requestID(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if ids := md.Get(RequestIDHeader); len(ids) > 0 && validRequestID(ids[0]) {
			return ids[0]
		}
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == ':' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}
