package quota

import (
	"context"

	"google.golang.org/protobuf/proto"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// GetSettings returns the account-wide quota settings.
func (s *Server) GetSettings(ctx context.Context, req *quotav1.GetSettingsRequest) (*quotav1.Settings, error) {
	if req.GetName() != settingsName {
		return nil, apierr.InvalidField("name", `must be "settings"`)
	}
	it, err := s.store.settings.Get(ctx, settingsID)
	if err != nil {
		return nil, settingsErr(err)
	}
	return fromItem(it), nil
}

// UpdateSettings changes the fields of update_mask. Turning
// reject_over_subscription on does not re-check existing quotas.
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
		if err := checkEtag(settingsName, in.GetEtag(), cur.Etag); err != nil {
			return err
		}
		paths, err := resolveMask(req.GetUpdateMask(), in, cur.Msg, settingsFields)
		if err != nil {
			return err
		}
		next := proto.Clone(cur.Msg).(*quotav1.Settings)
		applyMask(next, proto.Clone(in), paths)
		if unchanged(cur.Msg, next, cur.Msg.GetUpdateTime()) {
			out = fromItem(cur)
			return nil
		}
		next.UpdateTime = s.timestamp()
		c := &change{}
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
