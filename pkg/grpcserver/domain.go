package grpcserver

import "strings"

// DomainOf is the API domain of a full gRPC service name when
// Config.Domains does not list it: "runway.<svc>.v<N>.<Name>" →
// "<svc>.runway.dev" (the table in proto/README.md), anything else →
// "runway.dev".
func DomainOf(service string) string {
	parts := strings.Split(service, ".")
	if len(parts) == 4 && parts[0] == "runway" && strings.HasPrefix(parts[2], "v") {
		return parts[1] + ".runway.dev"
	}
	return "runway.dev"
}

// domainFor is the domain for errors of a method ("/pkg.Service/Method").
func (s *Server) domainFor(fullMethod string) string {
	service, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if d, ok := s.cfg.Domains[service]; ok {
		return d
	}
	return DomainOf(service)
}
