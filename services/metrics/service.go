package metrics

import (
	"context"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
)

// Service is what `runway serve metrics` and `runway dev` run: the
// MetricsService and the ReportService on one history, and the reports'
// background computation.
type Service struct {
	Metrics *Server
	Reports *Reports
}

// Register adds both services to a gRPC server.
func (s Service) Register(g *grpc.Server) {
	s.Metrics.Register(g)
	s.Reports.Register(g)
}

// RegisterGateway adds both services' REST routes.
func (s Service) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	if err := s.Metrics.RegisterGateway(ctx, mux, conn); err != nil {
		return err
	}
	return s.Reports.RegisterGateway(ctx, mux, conn)
}

// Run computes reports until ctx ends.
func (s Service) Run(ctx context.Context) error { return s.Reports.Run(ctx) }
