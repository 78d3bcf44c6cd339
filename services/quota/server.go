package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// DefaultInitTimeout bounds New's creation of the built-in resources.
const DefaultInitTimeout = 10 * time.Second

// Config is what a deployment decides about the service.
type Config struct {
	// InitTimeout bounds how long New waits for etcd while it creates the
	// built-in resources; 0 means DefaultInitTimeout.
	InitTimeout time.Duration
}

// Deps are the service's collaborators.
type Deps struct {
	// Client is the etcd client; required. The service never closes it.
	Client *clientv3.Client
	// Logger is for the service's own log lines; slog.Default() when nil.
	// (Access logs and the causes of Internal errors are pkg/grpcserver's.)
	Logger *slog.Logger
	// Now is the clock for create_time and update_time; time.Now when nil.
	Now func() time.Time
}

// Server implements runway.quota.v1.QuotaService on etcd. Its handlers are
// thin: check the request (validate.go), read, decide, and commit one change
// (store.go), re-reading on a concurrent write (retry). It holds no state of
// its own, so any number of replicas may serve the same etcd.
type Server struct {
	quotav1.UnimplementedQuotaServiceServer

	log   *slog.Logger
	now   func() time.Time
	store *store
}

// New returns the service and makes sure its built-in resources exist:
// nodepools/default, departments/default and the settings singleton, each
// created if absent (an existing one, with whatever changes were made to it,
// is kept, so restarts resume). It fails if etcd cannot be reached within
// Config.InitTimeout.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Client == nil {
		return nil, errors.New("quota: Deps.Client is nil")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = DefaultInitTimeout
	}
	s := &Server{log: deps.Logger, now: deps.Now, store: newStore(deps.Client)}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.InitTimeout)
	defer cancel()
	if err := s.createBuiltIns(ctx); err != nil {
		return nil, fmt.Errorf("quota: create the built-in resources: %w", err)
	}
	return s, nil
}

// Register registers the gRPC service; pass it to grpcserver.Server.Register.
func (s *Server) Register(g *grpc.Server) { quotav1.RegisterQuotaServiceServer(g, s) }

// RegisterGateway registers the REST handlers on the gateway mux, forwarding
// over conn; it is a grpcserver.GatewayFunc.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return quotav1.RegisterQuotaServiceHandler(ctx, mux, conn)
}

// createBuiltIns creates each built-in resource that is absent. They are
// independent, so each is its own create-if-absent; a crash in between
// leaves the others to the next start.
func (s *Server) createBuiltIns(ctx context.Context) error {
	now := s.timestamp()
	pool := &quotav1.NodePool{Name: defaultPool, Uid: newUID(), CreateTime: now, UpdateTime: now,
		Description: "Every node that no other node pool selects."}
	fillNodePool(pool)
	if _, err := s.store.pools.Create(ctx, builtInID, pool); err != nil && !errors.Is(err, etcdstore.ErrAlreadyExists) {
		return err
	}
	dept := &quotav1.Department{Name: defaultDept, Uid: newUID(), CreateTime: now, UpdateTime: now,
		Description: "Every project that names no department."}
	if _, err := s.store.departments.Create(ctx, builtInID, dept); err != nil && !errors.Is(err, etcdstore.ErrAlreadyExists) {
		return err
	}
	settings := &quotav1.Settings{Name: settingsName, Uid: newUID(), CreateTime: now, UpdateTime: now}
	fillSettings(settings)
	if _, err := s.store.settings.Create(ctx, settingsID, settings); err != nil && !errors.Is(err, etcdstore.ErrAlreadyExists) {
		return err
	}
	return nil
}

func (s *Server) timestamp() *timestamppb.Timestamp { return timestamppb.New(s.now()) }

// etagField is the `etag` field every stored resource has.
const etagField = protoreflect.Name("etag")

// withEtag returns msg with its etag set to the revision it was stored at;
// the etag is never stored itself (it is the key's ModRevision).
func withEtag[T proto.Message](msg T, rev int64) T {
	setEtag(msg, etcdstore.FormatEtag(rev))
	return msg
}

// fromItem is withEtag for a read.
func fromItem[T proto.Message](it etcdstore.Item[T]) T { return withEtag(it.Msg, it.Revision) }

// setEtag sets (or, with "", clears) the etag field of a resource.
func setEtag(msg proto.Message, etag string) {
	m := msg.ProtoReflect()
	m.Set(m.Descriptor().Fields().ByName(etagField), protoreflect.ValueOfString(etag))
}

// checkEtag is the AIP-154 rule: an etag sent must be the current one.
func checkEtag(name, sent, current string) error {
	if sent != "" && sent != current {
		return errEtag(name, current)
	}
	return nil
}

// unchanged reports whether next differs from cur only in update_time (and
// the never-stored etag): such an update writes nothing and keeps the etag.
func unchanged(cur, next proto.Message, curUpdate *timestamppb.Timestamp) bool {
	probe := proto.Clone(next)
	m := probe.ProtoReflect()
	if fd := m.Descriptor().Fields().ByName("update_time"); curUpdate != nil {
		m.Set(fd, protoreflect.ValueOfMessage(curUpdate.ProtoReflect()))
	} else {
		m.Clear(fd)
	}
	setEtag(probe, "")
	return proto.Equal(probe, cur)
}
