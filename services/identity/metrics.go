package identity

import (
	"context"
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// signInMethods are the method label's values, one per kind of credentials.
var signInMethods = []string{"password", "client_credentials", "oidc", "refresh_token", "none"}

func newSignIns() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runway_sign_ins_total",
		Help: "Sign-ins (Login calls) by method and outcome: success, or the gRPC code of the refusal in lower case."},
		[]string{"method", "outcome"})
}

// Collectors are the service's collectors, for the process's registry.
func (s *Server) Collectors() []prometheus.Collector {
	for _, m := range signInMethods[:4] {
		s.signIns.WithLabelValues(m, "success")
		s.signIns.WithLabelValues(m, "unauthenticated")
	}
	return []prometheus.Collector{s.signIns}
}

// Login exchanges credentials for an access token and a refresh token
// (login), counting the sign-in.
func (s *Server) Login(ctx context.Context, req *identityv1.LoginRequest) (*identityv1.LoginResponse, error) {
	resp, err := s.login(ctx, req)
	outcome := "success"
	if err != nil {
		code := status.Code(err)
		var e *apierr.Error
		if errors.As(err, &e) { // domain errors become statuses in the interceptor, later
			code = e.Code()
		}
		outcome = codeLabel(code)
	}
	s.signIns.WithLabelValues(signInMethod(req), outcome).Inc()
	return resp, err
}

func signInMethod(req *identityv1.LoginRequest) string {
	switch {
	case req.GetPassword() != nil:
		return "password"
	case req.GetClientCredentials() != nil:
		return "client_credentials"
	case req.GetOidc() != nil:
		return "oidc"
	case req.GetRefreshToken() != "":
		return "refresh_token"
	}
	return "none"
}

// codeLabel is a gRPC code as a label value: "unauthenticated",
// "invalid_argument", ...
func codeLabel(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
