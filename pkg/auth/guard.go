package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Defaults of Config.
const (
	DefaultAccessTTL   = time.Hour
	DefaultRefreshTTL  = 24 * time.Hour
	DefaultMaxTokenTTL = 30 * 24 * time.Hour // the `runway dev` token
	DefaultRotation    = 24 * time.Hour
	DefaultRetention   = 90 * 24 * time.Hour
	// Refused calls (refused.go): aggregated per window, limited per host,
	// and at most DefaultAuditMaxRefused of their events kept.
	DefaultRefusedWindow   = 10 * time.Second
	DefaultRefusedRate     = 20 // a second
	DefaultRefusedBurst    = 200
	DefaultAuditMaxRefused = 20000
)

// Config is what a deployment decides about tokens and the audit log.
type Config struct {
	// AccessTTL and RefreshTTL are the lifetimes of the tokens Login issues.
	AccessTTL, RefreshTTL time.Duration
	// MaxTokenTTL caps every token's lifetime, and so how long a rotated key
	// keeps verifying.
	MaxTokenTTL time.Duration
	// Rotation is how long a signing key signs before a new one takes over.
	Rotation time.Duration
	// AuditRetention is how long audit events are kept.
	AuditRetention time.Duration
	// RefusedWindow is how long alike refused calls are aggregated into
	// one audit event; RefusedRate and RefusedBurst limit a client host's
	// refused calls (a second, and at once) before its calls without a
	// verified token are refused unseen; AuditMaxRefused caps the events
	// of refused calls kept (the oldest go first; a change's never). 0
	// means the Default of each.
	RefusedWindow   time.Duration
	RefusedRate     float64
	RefusedBurst    int
	AuditMaxRefused int
}

func (c *Config) defaults() {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.AccessTTL, DefaultAccessTTL}, {&c.RefreshTTL, DefaultRefreshTTL}, {&c.MaxTokenTTL, DefaultMaxTokenTTL},
		{&c.Rotation, DefaultRotation}, {&c.AuditRetention, DefaultRetention}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.RefusedWindow <= 0 {
		c.RefusedWindow = DefaultRefusedWindow
	}
	if c.RefusedRate <= 0 {
		c.RefusedRate = DefaultRefusedRate
	}
	if c.RefusedBurst <= 0 {
		c.RefusedBurst = DefaultRefusedBurst
	}
	if c.AuditMaxRefused <= 0 {
		c.AuditMaxRefused = DefaultAuditMaxRefused
	}
}

// Guard authenticates and authorises every call. Build it with New (which
// loads its mirrors), run Run beside the server, and install
// UnaryInterceptor and StreamInterceptor in grpcserver.Config.Auth and
// AuthStream.
type Guard struct {
	cfg    Config
	client *clientv3.Client
	log    *slog.Logger
	now    func() time.Time

	keys     *keyring
	users    *mirror[*identityv1.StoredUser]
	apps     *mirror[*identityv1.StoredApplication]
	rules    *mirror[*identityv1.AccessRule]
	projects *mirror[*quotav1.Project]
	sessions *mirror[*identityv1.Session]
	audit    *recorder
	verified verifiedTokens // tokens whose signature was checked (verified.go)
}

// Deps are the guard's collaborators.
type Deps struct {
	Client *clientv3.Client // required
	Logger *slog.Logger     // slog.Default() when nil
	Now    func() time.Time // time.Now when nil
}

// New loads the mirrors and makes sure a signing key exists.
func New(ctx context.Context, cfg Config, deps Deps) (*Guard, error) {
	if deps.Client == nil {
		return nil, errors.New("auth: Deps.Client is nil")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	cfg.defaults()
	c := deps.Client
	g := &Guard{cfg: cfg, client: c, log: deps.Logger, now: deps.Now,
		users:    newMirror(c, etcdstore.PrefixUsers, func() *identityv1.StoredUser { return new(identityv1.StoredUser) }),
		apps:     newMirror(c, etcdstore.PrefixApplications, func() *identityv1.StoredApplication { return new(identityv1.StoredApplication) }),
		rules:    newMirror(c, etcdstore.PrefixAccessRules, func() *identityv1.AccessRule { return new(identityv1.AccessRule) }),
		projects: newMirror(c, etcdstore.PrefixProjects, func() *quotav1.Project { return new(quotav1.Project) }),
		sessions: newMirror(c, etcdstore.PrefixSessions, func() *identityv1.Session { return new(identityv1.Session) }),
	}
	g.keys = &keyring{client: c, rotation: cfg.Rotation, maxTTL: cfg.MaxTokenTTL, now: deps.Now,
		keys: newMirror(c, etcdstore.PrefixSigningKeys, func() *identityv1.SigningKey { return new(identityv1.SigningKey) })}
	g.audit = newRecorder(c, deps.Logger, deps.Now, cfg)
	for _, m := range g.loaders() {
		if err := m.load(ctx); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	if err := g.keys.rotate(ctx); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return g, nil
}

type loader interface {
	load(ctx context.Context) error
	run(ctx context.Context) error
	revision() int64
}

func (g *Guard) loaders() []loader {
	return []loader{g.users, g.apps, g.rules, g.projects, g.sessions, g.keys.keys}
}

// Run follows etcd, rotates keys, writes audit events and drops expired
// ones until ctx ends; it then returns ctx.Err() once all of that stopped
// (the audit events still queued are written first).
func (g *Guard) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, m := range g.loaders() {
		wg.Go(func() { _ = m.run(ctx) })
	}
	wg.Go(func() { g.audit.run(ctx) })
	tick := time.NewTicker(min(g.cfg.Rotation/10, time.Hour))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case <-tick.C:
			if err := g.Rotate(ctx); err != nil && ctx.Err() == nil {
				g.log.Warn("signing key rotation failed; retrying", "err", err)
			}
		}
	}
}

// Rotate adds a signing key if the newest is older than the rotation
// period and deletes keys past their retire time; Run calls it periodically.
// Tokens signed with an older key stay valid until they expire.
func (g *Guard) Rotate(ctx context.Context) error { return g.keys.rotate(ctx) }

// Sync waits until the guard has seen every change made to etcd before the
// call: an access rule just created applies to the next decision.
func (g *Guard) Sync(ctx context.Context) error {
	resp, err := g.client.Get(ctx, etcdstore.KeySchemaVersion, clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	want := resp.Header.Revision
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		behind := false
		for _, m := range g.loaders() {
			if m.revision() < want {
				behind = true
			}
		}
		if !behind {
			return nil
		}
		// The mirrors watch WithRequireLeader, which puts them on a stream
		// of their own: the request must name the same, or it reaches none.
		_ = g.client.RequestProgress(clientv3.WithRequireLeader(ctx))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Caller is an authenticated principal.
type Caller struct {
	Principal string    // users/{user}, applications/{application} or services/{service}
	Groups    []string  // a user's groups (a user application's: its creator's)
	Creator   string    // a user application's creator, users/{user}, whose access it acts with; "" otherwise
	Session   string    // the sign-in (services/identity's session) its token belongs to; "" for none
	UserUID   string    // the uid of the user whose access it acts with (itself or Creator); "" for others
	Expire    time.Time // when its token expires
	// Bound is what a tool ticket or session token is bound to; zero for
	// an API token.
	Bound   Bound
	subject Subject // the token's, to issue a tool ticket or session for
}

type callerKey struct{}

// CallerFrom is the authenticated caller of the call ctx belongs to.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCaller returns ctx carrying c, for handlers called in-process.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// authenticate verifies the bearer token in ctx's metadata.
func (g *Guard) authenticate(ctx context.Context, m Method) (Caller, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 || vals[0] == "" {
		return Caller{}, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_MISSING)
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return Caller{}, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
	}
	accept := m.Tokens
	if len(accept) == 0 {
		accept = []TokenType{AccessToken}
	}
	c, err := g.parse(ctx, strings.TrimSpace(token), accept...)
	if err != nil || c.Sid != "" && !g.sessionLive(ctx, c.Sid, c.Srev) {
		return Caller{}, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
	}
	out := g.caller(c.Subject, c.ExpiresAt.Time)
	out.Session = c.Sid
	out.subject = Subject{Principal: c.Subject, UID: c.UID, Gen: c.Gen, Session: c.Sid, SessionRevision: c.Srev}
	if c.Type == ToolTicketToken || c.Type == ToolSessionToken {
		out.Bound = Bound{Workload: c.Res, Tool: c.Tool, ID: c.ID, Type: c.Type}
	}
	return out, nil
}

// caller is what decisions need to know about principal.
func (g *Guard) caller(principal string, exp time.Time) Caller {
	out := Caller{Principal: principal, Expire: exp}
	kind, id, _ := strings.Cut(principal, "/")
	switch kind {
	case "users":
		if u, ok := g.users.get(id); ok {
			out.Groups = slices.Clone(u.GetUser().GetGroups())
			out.UserUID = u.GetUser().GetUid()
		}
	case "applications":
		// A managed application is itself alone; a user application is its
		// creator (current() has checked that the creator is the same user).
		if a, ok := g.apps.get(id); ok && userApplication(a.GetApplication()) {
			out.Creator = a.GetApplication().GetCreator()
			if u, ok := g.users.get(strings.TrimPrefix(out.Creator, "users/")); ok {
				out.Groups = slices.Clone(u.GetUser().GetGroups())
				out.UserUID = u.GetUser().GetUid()
			}
		}
	}
	return out
}

// userApplication reports whether a acts with its creator's access
// (UNSPECIFIED, stored before the kinds, did).
func userApplication(a *identityv1.Application) bool {
	return a.GetKind() != identityv1.ApplicationKind_APPLICATION_KIND_MANAGED
}

// creatorCurrent reports whether a user application's creator is still the
// user who made it: deleted and re-created with the same id is another
// user, who does not inherit it.
func (g *Guard) creatorCurrent(a *identityv1.StoredApplication) bool {
	if !userApplication(a.GetApplication()) {
		return true
	}
	u, ok := g.users.get(strings.TrimPrefix(a.GetApplication().GetCreator(), "users/"))
	return ok && (a.GetCreatorUid() == "" || u.GetUser().GetUid() == a.GetCreatorUid())
}

// Rules are the access rules that apply to c, ordered by name: those naming
// it (for a user application: its creator) and its groups.
func (g *Guard) Rules(c Caller) []*identityv1.AccessRule {
	out := g.rulesOf(c)
	slices.SortFunc(out, func(x, y *identityv1.AccessRule) int { return strings.Compare(x.GetName(), y.GetName()) })
	return out
}

// rulesOf is Rules unsorted, for decisions.
func (g *Guard) rulesOf(c Caller) []*identityv1.AccessRule {
	var out []*identityv1.AccessRule
	g.rules.each(func(_ string, r *identityv1.AccessRule) {
		if applies(r.GetSubject(), c) {
			out = append(out, r)
		}
	})
	return out
}

func applies(s *identityv1.Subject, c Caller) bool {
	switch s.GetKind() {
	case identityv1.SubjectKind_SUBJECT_KIND_USER, identityv1.SubjectKind_SUBJECT_KIND_APPLICATION:
		if c.Creator != "" {
			return s.GetName() == c.Creator
		}
		return s.GetName() == c.Principal
	case identityv1.SubjectKind_SUBJECT_KIND_GROUP:
		return slices.Contains(c.Groups, s.GetName())
	}
	return false
}

// DepartmentOf is the department of a project ("projects/x"), from the
// mirror; "" when the project is unknown.
func (g *Guard) DepartmentOf(project string) string {
	p, ok := g.projects.get(strings.TrimPrefix(project, "projects/"))
	if !ok {
		return ""
	}
	if d := p.GetDepartment(); d != "" {
		return d
	}
	return "departments/default"
}

// AccessTTL is the lifetime of the access tokens Login issues.
func (g *Guard) AccessTTL() time.Duration { return g.cfg.AccessTTL }

// RefreshTTL is the lifetime of the refresh tokens Login issues.
func (g *Guard) RefreshTTL() time.Duration { return g.cfg.RefreshTTL }
