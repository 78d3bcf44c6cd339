package workload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// WatchWorkloads sends the workloads of a parent (ADDED each, then SYNCED)
// and then every change from the etcd watch, in store order, until the
// client cancels; it then returns cleanly.
//
// The stream remembers which workloads the client has been told about and
// whether each matched the filter, so that a workload that starts matching
// is ADDED, one that stops is DELETED, and changes to workloads outside the
// filter are not sent at all.
//
// Resume tokens are positions in the store's history, "{revision}.{n}": the
// next change to send is at revision or later, after the first n changes of
// that revision (one etcd transaction can change several workloads). A
// resumed stream rebuilds what the client knows from the store as it was at
// revision-1, so it needs that history: once etcd has compacted it the
// stream fails with RESUME_TOKEN_EXPIRED, as it also does if the live watch
// falls that far behind.
func (s *Server) WatchWorkloads(req *workloadv1.WatchWorkloadsRequest, stream workloadv1.WorkloadService_WatchWorkloadsServer) error {
	project, ok := parseParent(req.GetParent(), true)
	if !ok {
		return apierr.InvalidField("parent", "must be projects/{project} or projects/- for every project")
	}
	f, err := parseFilter(req.GetFilter())
	if err != nil {
		return err
	}
	var from position
	if req.GetResumeToken() != "" {
		if from, ok = parsePosition(req.GetResumeToken()); !ok {
			return apierr.InvalidField("resume_token", "must be a resume_token from an earlier WatchWorkloadsResponse")
		}
	}
	release, err := s.watches.open(watchCaller(stream.Context()), project,
		watchCaps{perCaller: s.cfg.MaxWatchesPerCaller, perProject: s.cfg.MaxWatchesPerProject, total: s.cfg.MaxWatches})
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if project != "-" {
		if err := s.projects.ProjectExists(ctx, req.GetParent()); err != nil {
			return err
		}
	}
	ws := &watchStream{stream: stream, filter: f, known: map[string]bool{}}
	if req.GetResumeToken() != "" {
		err = ws.resume(ctx, s.store, project, from)
	} else {
		from, err = ws.list(ctx, s.store, project)
	}
	if err == nil {
		err = ws.send(workloadv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED, nil, from)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // the client went away during the listing
		}
		return watchError(err, req.GetParent())
	}
	s.log.DebugContext(ctx, "watch synced", "parent", req.GetParent(), "filter", req.GetFilter(), "from", from.String())
	err = ws.follow(ctx, s.store.watch(ctx, project, from.rev), from)
	if ctx.Err() != nil {
		return nil // the client went away: not an error of ours
	}
	return watchError(err, req.GetParent())
}

// watchCaller is whom a watch counts against: the user a user application
// acts for (so its applications share its cap), else the principal; "" for
// a server without authentication.
func watchCaller(ctx context.Context) string {
	c, _ := auth.CallerFrom(ctx)
	if c.Creator != "" {
		return c.Creator
	}
	return c.Principal
}

// watchStream is one WatchWorkloads call.
type watchStream struct {
	stream workloadv1.WorkloadService_WatchWorkloadsServer
	filter filter
	// known holds every workload of the parent the stream has seen, mapped
	// to whether the client holds it (it matched the filter when last seen).
	known map[string]bool
}

// list sends the current workloads, each ADDED at the listing's position.
func (ws *watchStream) list(ctx context.Context, st *store, project string) (position, error) {
	items, rev, err := st.listAll(ctx, project)
	if err != nil {
		return position{}, err
	}
	at := position{rev: rev + 1}
	for _, w := range items {
		match := ws.filter.matches(w)
		ws.known[w.GetName()] = match
		if match {
			if err := ws.send(workloadv1.WatchEventType_WATCH_EVENT_TYPE_ADDED, w, at); err != nil {
				return position{}, err
			}
		}
	}
	return at, nil
}

// resume rebuilds what the client knows at position from: the store as of
// from.rev-1; the first from.skip changes at from.rev are replayed silently
// by follow.
func (ws *watchStream) resume(ctx context.Context, st *store, project string, from position) error {
	items, err := st.listAt(ctx, project, from.rev-1)
	if err != nil {
		return err
	}
	for _, w := range items {
		ws.known[w.GetName()] = ws.filter.matches(w)
	}
	return nil
}

// follow sends the changes of the watch until it ends. The first from.skip
// changes at revision from.rev were sent before the resume: they only update
// what the stream knows.
func (ws *watchStream) follow(ctx context.Context, events <-chan etcdstore.WatchEvent[*workloadv1.Workload], from position) error {
	at := position{rev: from.rev}
	for ev := range events {
		if ev.Err != nil {
			return ev.Err
		}
		if ev.Item.Revision == at.rev {
			at.skip++
		} else {
			at = position{rev: ev.Item.Revision, skip: 1}
		}
		typ, w := ws.apply(ev)
		if typ == workloadv1.WatchEventType_WATCH_EVENT_TYPE_UNSPECIFIED ||
			(at.rev == from.rev && at.skip <= from.skip) {
			continue
		}
		if err := ws.send(typ, w, at); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// apply updates what the stream knows with one change and says what to send
// (UNSPECIFIED: nothing).
func (ws *watchStream) apply(ev etcdstore.WatchEvent[*workloadv1.Workload]) (workloadv1.WatchEventType, *workloadv1.Workload) {
	w := ev.Item.Msg
	name := w.GetName()
	held := ws.known[name]
	if ev.Type == etcdstore.EventDelete {
		delete(ws.known, name)
		w.Etag = "" // the item's etag is the deletion's revision, not a state's
		if held {
			return workloadv1.WatchEventType_WATCH_EVENT_TYPE_DELETED, w
		}
		return workloadv1.WatchEventType_WATCH_EVENT_TYPE_UNSPECIFIED, nil
	}
	w = withEtag(ev.Item)
	match := ws.filter.matches(w)
	ws.known[name] = match
	switch {
	case match && held:
		return workloadv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED, w
	case match:
		return workloadv1.WatchEventType_WATCH_EVENT_TYPE_ADDED, w
	case held:
		return workloadv1.WatchEventType_WATCH_EVENT_TYPE_DELETED, w
	}
	return workloadv1.WatchEventType_WATCH_EVENT_TYPE_UNSPECIFIED, nil
}

func (ws *watchStream) send(typ workloadv1.WatchEventType, w *workloadv1.Workload, at position) error {
	return ws.stream.Send(&workloadv1.WatchWorkloadsResponse{Type: typ, Workload: w, ResumeToken: at.String()})
}

// watchError maps the errors a watch can end with.
func watchError(err error, parent string) error {
	if errors.Is(err, errFutureRevision) {
		return apierr.InvalidField("resume_token", "must be a resume_token from an earlier WatchWorkloadsResponse")
	}
	return apiError(err, parent)
}

// position is a place in the store's history: the next change is at
// revision rev or later, after the first skip changes of rev.
type position struct {
	rev  int64
	skip int
}

func (p position) String() string { return fmt.Sprintf("%d.%d", p.rev, p.skip) }

// parsePosition reads a resume token. Revision 1 is etcd's empty store, so a
// token (made after a listing at revision >= 1) is at revision 2 or later.
func parsePosition(s string) (position, bool) {
	r, k, found := strings.Cut(s, ".")
	rev, err1 := strconv.ParseInt(r, 10, 64)
	skip, err2 := strconv.Atoi(k)
	if !found || err1 != nil || err2 != nil || rev < 2 || skip < 0 {
		return position{}, false
	}
	return position{rev: rev, skip: skip}, true
}
