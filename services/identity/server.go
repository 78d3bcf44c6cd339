package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Config is what a deployment decides about the service.
type Config struct {
	// OIDC enables sign-in through an OpenID Connect provider; nil disables it.
	OIDC *OIDCConfig
	// BcryptCost is the password hashing cost; 0 means bcrypt.DefaultCost.
	// (Tests lower it.)
	BcryptCost int
	// MaxFailures failed sign-ins within FailureWindow lock a user or client
	// id out until the window has passed; 0 means 5 and 5 minutes. The
	// failures are kept in etcd, so every replica counts them alike.
	MaxFailures   int
	FailureWindow time.Duration
	// MaxSourceFailures failed sign-ins from one client address (whatever
	// the names tried) within FailureWindow refuse its sign-ins until the
	// window has passed; 0 means DefaultMaxSourceFailures.
	MaxSourceFailures int
	// MaxSessions is how many live sessions (sign-ins) one user holds (an
	// application ten times as many): a new sign-in beyond it ends the
	// oldest; 0 means DefaultMaxSessions.
	MaxSessions int
}

// Defaults of Config.
const (
	DefaultMaxSourceFailures = 50
	DefaultMaxSessions       = 10
)

// OIDCConfig is the OpenID Connect provider whose ID tokens Login accepts.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// Issuer + "/.well-known/openid-configuration").
	Issuer string
	// ClientID is Runway's client id at the provider: the ID token's audience.
	ClientID string
	// LinkVerifiedEmail lets an SSO sign-in whose ID token carries
	// email_verified: true become the existing user with that email (once;
	// from then on the user is found by issuer and sub). Off, or without a
	// verified email, every new (issuer, sub) is a new user.
	LinkVerifiedEmail bool
	// GroupsClaim names the claim listing the user's groups; "groups" when
	// empty.
	GroupsClaim string
	// HTTPClient fetches the discovery document and the signing keys;
	// one with a 10 s timeout when nil.
	HTTPClient *http.Client
}

// Deps are the service's collaborators.
type Deps struct {
	Client *clientv3.Client // required
	Guard  *auth.Guard      // required: signs tokens, knows callers
	Logger *slog.Logger     // slog.Default() when nil
	Now    func() time.Time // time.Now when nil
}

// MaxApplicationsPerUser is how many applications one user may create.
const MaxApplicationsPerUser = 20

// Server implements runway.identity.v1.IdentityService.
type Server struct {
	identityv1.UnimplementedIdentityServiceServer

	cfg    Config
	client *clientv3.Client
	guard  *auth.Guard
	log    *slog.Logger
	now    func() time.Time

	users *etcdstore.Collection[*identityv1.StoredUser]
	apps  *etcdstore.Collection[*identityv1.StoredApplication]
	rules *etcdstore.Collection[*identityv1.AccessRule]

	throttle *throttle // by user, client id or unknown name
	sources  *throttle // by client address
	// decoy is what an unknown name's password is compared with (decoyHash).
	decoyOnce sync.Once
	decoy     []byte
	oidcMu    sync.Mutex
	oidc      *oidcVerifier // built at the first OIDC sign-in
	// oidcErr is the last failed discovery, tried again discoveryRetry after
	// oidcErrAt.
	oidcErr   error
	oidcErrAt time.Time
	// redeeming holds a slot per authorization code being redeemed.
	redeeming chan struct{}
	signIns   *prometheus.CounterVec
}

// New returns the service.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Client == nil || deps.Guard == nil {
		return nil, errors.New("identity: Deps.Client and Deps.Guard are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = bcrypt.DefaultCost
	}
	if cfg.MaxFailures <= 0 {
		cfg.MaxFailures = 5
	}
	if cfg.FailureWindow <= 0 {
		cfg.FailureWindow = 5 * time.Minute
	}
	if cfg.MaxSourceFailures <= 0 {
		cfg.MaxSourceFailures = DefaultMaxSourceFailures
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.BcryptCost < bcrypt.MinCost || cfg.BcryptCost > bcrypt.MaxCost {
		return nil, fmt.Errorf("identity: bcrypt cost %d is outside %d-%d", cfg.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	c := deps.Client
	return &Server{cfg: cfg, client: c, guard: deps.Guard, log: deps.Logger, now: deps.Now,
		users:     etcdstore.NewCollection(c, etcdstore.PrefixUsers, func() *identityv1.StoredUser { return new(identityv1.StoredUser) }),
		apps:      etcdstore.NewCollection(c, etcdstore.PrefixApplications, func() *identityv1.StoredApplication { return new(identityv1.StoredApplication) }),
		rules:     etcdstore.NewCollection(c, etcdstore.PrefixAccessRules, func() *identityv1.AccessRule { return new(identityv1.AccessRule) }),
		throttle:  newThrottle(c, cfg.MaxFailures, cfg.FailureWindow, deps.Now, deps.Logger),
		sources:   newThrottle(c, cfg.MaxSourceFailures, cfg.FailureWindow, deps.Now, deps.Logger),
		signIns:   newSignIns(),
		redeeming: make(chan struct{}, MaxCodeRedemptions),
	}, nil
}

// Register registers the gRPC service.
func (s *Server) Register(g *grpc.Server) { identityv1.RegisterIdentityServiceServer(g, s) }

// RegisterGateway registers the REST handlers; a grpcserver.GatewayFunc.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return identityv1.RegisterIdentityServiceHandler(ctx, mux, conn)
}

// BootstrapAdmin is the administrator created on the first start.
const BootstrapAdmin = "users/admin"

// Bootstrap creates, on the very first start only, the administrator
// users/admin with a random temporary password and an access rule making it
// System administrator on the account, together with a marker
// (etcdstore.KeyBootstrapped) in one transaction: once the marker is there,
// nothing is created again, so an administrator or rule deleted on purpose
// stays deleted across restarts. It returns the password when it created
// the user (the only time it is known: print it once), "" otherwise. At
// every start it also writes the sign-in index keys a store from before
// them lacks.
func (s *Server) Bootstrap(ctx context.Context) (string, error) {
	password, err := s.bootstrapAdmin(ctx)
	if err != nil {
		return "", err
	}
	if err := s.backfillIndexes(ctx); err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	return password, nil
}

func (s *Server) bootstrapAdmin(ctx context.Context) (string, error) {
	for attempt := 0; attempt < 3; attempt++ {
		marker, err := s.client.Get(ctx, etcdstore.KeyBootstrapped, clientv3.WithCountOnly())
		if err != nil {
			return "", fmt.Errorf("bootstrap: %w", err)
		}
		if marker.Count > 0 {
			return "", nil
		}
		password, err := s.bootstrapOnce(ctx)
		if errors.Is(err, etcdstore.ErrConflict) {
			continue // another replica got there first, or the user changed
		}
		return password, err
	}
	return "", errors.New("bootstrap: kept conflicting with another writer")
}

// bootstrapOnce writes the marker with whichever of the administrator and
// its rule is missing (a store bootstrapped before the marker existed keeps
// what it has).
func (s *Server) bootstrapOnce(ctx context.Context) (string, error) {
	now := s.timestamp()
	b := etcdstore.NewBatch(s.client).PutIf(etcdstore.KeyBootstrapped, now, 0)
	password := ""
	user, err := s.users.Get(ctx, "admin")
	switch {
	case errors.Is(err, etcdstore.ErrNotFound):
		password = randomSecret(18)
		hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cfg.BcryptCost)
		if err != nil {
			return "", err
		}
		b.PutIf(s.users.Key("admin"), &identityv1.StoredUser{PasswordHash: string(hash), CredentialGeneration: 1,
			User: &identityv1.User{Name: BootstrapAdmin, Uid: newUID(), Email: "admin@runway.local", DisplayName: "Administrator",
				PasswordChangeRequired: true, CreateTime: now, UpdateTime: now}}, 0)
	case err != nil:
		return "", fmt.Errorf("bootstrap: %w", err)
	default:
		b.Check(s.users.Key("admin"), user.Revision)
	}
	rule, err := s.rules.Get(ctx, "bootstrap-admin")
	switch {
	case errors.Is(err, etcdstore.ErrNotFound):
		b.PutIf(s.rules.Key("bootstrap-admin"), &identityv1.AccessRule{Name: "accessRules/bootstrap-admin", Uid: newUID(),
			Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: BootstrapAdmin},
			Role:    "roles/system-admin", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT},
			Creator: BootstrapAdmin, CreateTime: now, UpdateTime: now}, 0)
	case err != nil:
		return "", fmt.Errorf("bootstrap: %w", err)
	default:
		b.Check(s.rules.Key("bootstrap-admin"), rule.Revision)
	}
	if _, err := b.Commit(ctx); err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	return password, nil
}

// Token issues an access token for a user, valid for ttl (capped by the
// guard's longest lifetime): `runway dev` hands one to its operator.
func (s *Server) Token(ctx context.Context, user string, ttl time.Duration) (string, error) {
	it, err := s.users.Get(ctx, userID(user))
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", user, err)
	}
	tok, _, err := s.guard.Issue(userSubject(it.Msg), auth.AccessToken, ttl)
	return tok, err
}

func (s *Server) timestamp() *timestamppb.Timestamp { return timestamppb.New(s.now()) }

var idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

func checkID(field, id string) error {
	if !idPattern.MatchString(id) {
		return apierr.InvalidField(field, "must be 1-63 characters of [a-z0-9-] starting with a letter")
	}
	return nil
}

// randomSecret is n random bytes, URL-safe base64.
func randomSecret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func newUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// storeErr maps a store error about resource r named name.
func storeErr(err error, r apierr.Resource, name string) error {
	var em *etcdstore.EtagMismatchError
	switch {
	case errors.Is(err, etcdstore.ErrNotFound):
		return apierr.NotFound(r, name)
	case errors.Is(err, etcdstore.ErrAlreadyExists):
		return apierr.AlreadyExists(r, name)
	case errors.As(err, &em):
		return apierr.EtagMismatch(name, em.CurrentEtag)
	}
	return err
}
