package quota

import (
	"context"
	"errors"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Bounds of the general settings (settings.proto).
const (
	maxLoginBanner   = 1000 // characters
	minAutoSuspend   = time.Minute
	maxAutoSuspend   = 365 * 24 * time.Hour
	autoSuspendRange = "1 minute to 365 days"
)

// GetSettings returns the account's general settings, with every option's
// effective value.
func (s *Server) GetSettings(ctx context.Context, req *quotav1.GetSettingsRequest) (*quotav1.Settings, error) {
	if req.GetName() != settingsName {
		return nil, apierr.InvalidField("name", `must be "settings"`)
	}
	return s.settings(ctx)
}

// GetLoginBanner returns the login banner alone: it is served without a
// token (pkg/auth), so nothing else of the settings goes with it.
func (s *Server) GetLoginBanner(ctx context.Context, _ *quotav1.GetLoginBannerRequest) (*quotav1.LoginBanner, error) {
	st, err := s.settings(ctx)
	if err != nil {
		return nil, err
	}
	return &quotav1.LoginBanner{Text: st.GetLoginBanner()}, nil
}

func (s *Server) settings(ctx context.Context) (*quotav1.Settings, error) {
	it, err := s.store.settings.Get(ctx, settingsID)
	if err != nil {
		return nil, settingsErr(err)
	}
	fillSettings(it.Msg) // stored by a version without the newer options
	return fromItem(it), nil
}

// UpdateSettings changes the fields of update_mask. A change applies to
// what is created or submitted afterwards: turning reject_over_subscription
// on does not re-check existing quotas, a new default node pool does not
// move existing projects.
func (s *Server) UpdateSettings(ctx context.Context, req *quotav1.UpdateSettingsRequest) (*quotav1.Settings, error) {
	in := req.GetSettings()
	var v violations
	v.checkRequired("settings", in == nil)
	if in != nil && in.GetName() != settingsName {
		v.add("settings.name", `must be "settings"`)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	var out *quotav1.Settings
	err := retry(settingsName, func() error {
		cur, err := s.store.settings.Get(ctx, settingsID)
		if err != nil {
			return settingsErr(err)
		}
		fillSettings(cur.Msg)
		if err := checkEtag(settingsName, in.GetEtag(), cur.Etag); err != nil {
			return err
		}
		paths, err := resolveMask(req.GetUpdateMask(), in, cur.Msg, settingsFields)
		if err != nil {
			return err
		}
		next := proto.Clone(cur.Msg).(*quotav1.Settings)
		applyMask(next, proto.Clone(in), paths)
		fillSettings(next)
		if err := checkSettings(next); err != nil {
			return err
		}
		if unchanged(cur.Msg, next, cur.Msg.GetUpdateTime()) {
			out = fromItem(cur)
			return nil
		}
		c := &change{}
		// The default pool must still exist when the change commits; a
		// delete of it reads the settings under the same condition.
		if _, err := s.poolRefs(ctx, c, []string{next.GetDefaultNodePool()}, []string{"settings.default_node_pool"}); err != nil {
			return err
		}
		next.UpdateTime = s.timestamp()
		c.put(s.store.settings.Key(settingsID), next, cur.Revision)
		rev, err := s.store.commit(ctx, c)
		if err != nil {
			return settingsErr(err)
		}
		out = withEtag(next, rev)
		return nil
	})
	return out, err
}

// fillSettings sets the options whose unset value means a default.
func fillSettings(st *quotav1.Settings) {
	if st.DefaultNodePool == "" {
		st.DefaultNodePool = defaultPool
	}
	if st.GpuResourceOptimization == nil {
		st.GpuResourceOptimization = proto.Bool(true)
	}
}

// checkSettings reports every bad option of filled settings at once.
func checkSettings(st *quotav1.Settings) error {
	var v violations
	v.checkName("settings.default_node_pool", st.GetDefaultNodePool(), nodePoolsCollection)
	if d := st.GetWorkspaceAutoSuspend(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < minAutoSuspend || d.AsDuration() > maxAutoSuspend {
			v.add("settings.workspace_auto_suspend", "must be %s", autoSuspendRange)
		}
	}
	b := st.GetLoginBanner()
	if n := utf8.RuneCountInString(b); n > maxLoginBanner {
		v.add("settings.login_banner", "must be at most %d characters, not %d", maxLoginBanner, n)
	}
	for _, r := range b {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			v.add("settings.login_banner", "must hold no control characters but newlines and tabs (found %U)", r)
			break
		}
	}
	return v.err()
}

// currentSettings reads the settings for a write that depends on them, and
// conditions c on them. Missing (only before New's bootstrap ran) means the
// defaults.
func (s *Server) currentSettings(ctx context.Context, c *change) (*quotav1.Settings, error) {
	it, err := s.store.settings.Get(ctx, settingsID)
	switch {
	case err == nil:
		c.check(s.store.settings.Key(settingsID), it.Revision)
		fillSettings(it.Msg)
		return it.Msg, nil
	case errors.Is(err, etcdstore.ErrNotFound):
		st := &quotav1.Settings{}
		fillSettings(st)
		c.check(s.store.settings.Key(settingsID), 0)
		return st, nil
	}
	return nil, settingsErr(err)
}
