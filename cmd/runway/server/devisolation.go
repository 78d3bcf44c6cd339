package server

import (
	"context"
	"os"
	"os/user"
	"strings"

	"google.golang.org/grpc"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/services/identity"
)

// DevOneUser says whether `runway dev` with engine runs every pod as its
// own account: the process runtime without root, where a pod reads
// whatever the developer can (DATA-DIR/env: the administrator's token). It
// then runs only the administrator's workloads (oneUserGate).
func DevOneUser(engine string) bool { return engine == "" && os.Geteuid() != 0 }

// DevOneUserHint is how to run more than one user's pods.
const DevOneUserHint = "start runway dev as root or with --runtime container to run other users' pods"

// oneUserGate lets only the bootstrap administrator (and its own
// applications, which act with its access) create workloads; services
// (the Kubernetes runtime's users' pods, which the kubelet runs) pass.
func oneUserGate(next grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	create := workloadv1.WorkloadService_CreateWorkload_FullMethodName
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod != create {
			return next(ctx, req, info, handler)
		}
		return next(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			c, _ := auth.CallerFrom(ctx)
			if c.Principal != identity.BootstrapAdmin && c.Creator != identity.BootstrapAdmin && (!strings.HasPrefix(c.Principal, "services/") || auth.IsNodeAgent(c.Principal)) {
				return nil, apierr.OneUserRuntime(c.Principal, identity.BootstrapAdmin, DevOneUserHint)
			}
			return handler(ctx, req)
		})
	}
}

// DevIsolation says in a phrase what `runway dev`'s pods on engine are
// kept from.
func DevIsolation(engine string) string {
	switch {
	case engine != "":
		return "each pod a container of its image: its own root file system, network, CPU and memory limits, with a clean environment"
	case DevOneUser(engine):
		name := "this user"
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		return "every pod runs as " + name + " (not root): no isolation from each other or from runway dev's data and token, " +
			"so only " + identity.BootstrapAdmin + "'s workloads run; " + DevOneUserHint
	}
	return "each pod its own uid, in a mount namespace hiding runway dev's data and keys, seeing only its own processes, with a clean environment"
}
