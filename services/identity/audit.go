package identity

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// fixedTime is RFC 3339 with a fixed width, so strings compare like times.
const fixedTime = "2006-01-02T15:04:05.000000000Z07:00"

// ListAuditEvents lists audit events newest first. Keys are time-ordered,
// so a create_time lower bound narrows the key range read; the other
// comparisons are tested per event.
func (s *Server) ListAuditEvents(ctx context.Context, req *identityv1.ListAuditEventsRequest) (*identityv1.ListAuditEventsResponse, error) {
	f, err := parseFilter(req.GetFilter(), map[string]bool{"principal": true, "method": true, "resource": true,
		"status_code": true, "create_time": true})
	if err != nil {
		return nil, err
	}
	from := etcdstore.PrefixAudit
	for i, c := range f {
		if c.field != "create_time" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, c.value)
		if err != nil {
			return nil, apierr.InvalidFilter(req.GetFilter(), "create_time takes an RFC 3339 time")
		}
		f[i].value = t.UTC().Format(fixedTime)
		if c.op == ">=" || c.op == ">" {
			from = etcdstore.PrefixAudit + fmt.Sprintf("%016x", t.UnixNano())
		}
	}
	end := clientv3.GetPrefixRangeEnd(etcdstore.PrefixAudit)
	if tok := req.GetPageToken(); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || !strings.HasPrefix(string(b), etcdstore.PrefixAudit) {
			return nil, apierr.InvalidPageToken()
		}
		end = string(b) // exclusive: the last key of the previous page
	}
	size := etcdstore.PageSize(int(req.GetPageSize()))
	out := &identityv1.ListAuditEventsResponse{}
	for len(out.AuditEvents) < size {
		resp, err := s.client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
			clientv3.WithLimit(int64(size)))
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			ev := &identityv1.AuditEvent{}
			if err := proto.Unmarshal(kv.Value, ev); err != nil {
				return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
			}
			end = string(kv.Key)
			if f.matches(map[string][]string{"principal": {ev.GetPrincipal()}, "method": {ev.GetMethod()},
				"resource": {ev.GetResource()}, "status_code": {strconv.Itoa(int(ev.GetStatusCode()))},
				"create_time": {ev.GetCreateTime().AsTime().UTC().Format(fixedTime)}}) {
				out.AuditEvents = append(out.AuditEvents, ev)
				if len(out.AuditEvents) == size {
					break
				}
			}
		}
		if !resp.More && len(resp.Kvs) < size || len(resp.Kvs) == 0 {
			return out, nil
		}
	}
	out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(end))
	return out, nil
}
