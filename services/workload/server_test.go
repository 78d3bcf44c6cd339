package workload_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

func TestWorkloadService_CreateGetListDelete(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()

	in := training()
	in.Name, in.Uid, in.Etag = "ignored", "ignored", "ignored" // output only
	in.Status = &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING}
	got := e.create(t, "team-a", "a1", in)

	if got.GetUid() == "" || got.GetUid() == "ignored" || got.GetEtag() == "" || got.GetEtag() == "ignored" {
		t.Errorf("uid %q etag %q, want server-assigned values", got.GetUid(), got.GetEtag())
	}
	want := &workloadv1.Workload{
		Name:    "projects/team-a/workloads/a1",
		Project: "projects/team-a",
		Type:    workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: &workloadv1.WorkloadSpec{
			Image: "nvcr.io/nvidia/pytorch:25.01-py3", Command: []string{"python", "train.py"},
			Gpu:  &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}},
			Pods: 1, MinPods: 1, Priority: "train",
		},
		Status: &workloadv1.WorkloadStatus{
			Phase:         workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING,
			RequestedPods: 1,
			PendingReasons: []*workloadv1.PendingReason{{
				Check: workloadv1.PendingCheck_PENDING_CHECK_NOT_YET_CONSIDERED, Message: "Waiting for the next scheduling cycle.",
			}},
			Events: []*workloadv1.WorkloadEvent{{
				Type: workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUBMITTED, Time: timestamppb.New(t0),
				Message: "Submitted to project team-a with priority train (50, preemptible), 1 pod(s).",
			}},
		},
		CreateTime: timestamppb.New(t0),
		UpdateTime: timestamppb.New(t0),
	}
	ignoreServerValues := protocmp.IgnoreFields(&workloadv1.Workload{}, "uid", "etag")
	if diff := cmp.Diff(want, got, protocmp.Transform(), ignoreServerValues); diff != "" {
		t.Errorf("CreateWorkload (-want +got):\n%s", diff)
	}

	read, err := e.client.GetWorkload(ctx, &workloadv1.GetWorkloadRequest{Name: got.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, read, protocmp.Transform()); diff != "" {
		t.Errorf("GetWorkload differs from what CreateWorkload returned (-create +get):\n%s", diff)
	}

	list, err := e.client.ListWorkloads(ctx, &workloadv1.ListWorkloadsRequest{Parent: "projects/team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&workloadv1.ListWorkloadsResponse{Workloads: []*workloadv1.Workload{got}}, list, protocmp.Transform()); diff != "" {
		t.Errorf("ListWorkloads (-want +got):\n%s", diff)
	}

	if _, err := e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: got.GetName()}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetWorkload(ctx, &workloadv1.GetWorkloadRequest{Name: got.GetName()})
	md := wantError(t, err, codes.NotFound, "WORKLOAD_NOT_FOUND")
	if md["workload"] != got.GetName() {
		t.Errorf("metadata %v, want workload %q", md, got.GetName())
	}
	_, err = e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: got.GetName()})
	wantError(t, err, codes.NotFound, "WORKLOAD_NOT_FOUND")
}

func TestCreateWorkload_Defaults(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	for name, tc := range map[string]struct {
		id           string
		typ          workloadv1.WorkloadType
		spec         *workloadv1.WorkloadSpec
		wantPriority string
		wantPods     int32
		wantMinPods  int32
		wantPhase    workloadv1.WorkloadPhase
	}{
		"a workspace defaults to build": {
			id: "ws", typ: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, spec: &workloadv1.WorkloadSpec{Image: "jupyter"},
			wantPriority: "build", wantPods: 1, wantMinPods: 1, wantPhase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING,
		},
		"inference defaults to inference and keeps its replicas": {
			id: "inf", typ: workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE, spec: &workloadv1.WorkloadSpec{Image: "vllm", Pods: 3},
			wantPriority: "inference", wantPods: 3, wantMinPods: 3, wantPhase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING,
		},
		"a distributed training keeps its minimum": {
			id: "dist", typ: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, spec: &workloadv1.WorkloadSpec{Image: "pytorch", Pods: 4, MinPods: 2, Priority: "interactive-preemptible"},
			wantPriority: "interactive-preemptible", wantPods: 4, wantMinPods: 2, wantPhase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING,
		},
		"a workload submitted suspended is stopped": {
			id: "stopped", typ: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, spec: &workloadv1.WorkloadSpec{Image: "pytorch", Suspended: true},
			wantPriority: "train", wantPods: 1, wantMinPods: 1, wantPhase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := e.create(t, "team-a", tc.id, &workloadv1.Workload{Type: tc.typ, Spec: tc.spec})
			spec, st := got.GetSpec(), got.GetStatus()
			if spec.GetPriority() != tc.wantPriority || spec.GetPods() != tc.wantPods || spec.GetMinPods() != tc.wantMinPods {
				t.Errorf("priority %q pods %d min_pods %d, want %q %d %d",
					spec.GetPriority(), spec.GetPods(), spec.GetMinPods(), tc.wantPriority, tc.wantPods, tc.wantMinPods)
			}
			if st.GetPhase() != tc.wantPhase || st.GetRequestedPods() != tc.wantPods {
				t.Errorf("phase %v requested_pods %d, want %v %d", st.GetPhase(), st.GetRequestedPods(), tc.wantPhase, tc.wantPods)
			}
		})
	}
}

func TestListWorkloads_AcrossProjectsAndPages(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a", "team-b", "team-c")
	ctx := t.Context()
	var wantAll []string
	for _, name := range []string{"team-a/a1", "team-a/a2", "team-a/a3", "team-b/b1", "team-b/b2"} {
		p, id, _ := strings.Cut(name, "/")
		w := training()
		if id == "a2" || id == "b2" {
			w.Type = workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE
		}
		e.create(t, p, id, w)
		wantAll = append(wantAll, "projects/"+p+"/workloads/"+id)
	}

	listAll := func(t *testing.T, parent, filter string, pageSize int32) (names []string, pages int) {
		t.Helper()
		token := ""
		for {
			resp, err := e.client.ListWorkloads(ctx, &workloadv1.ListWorkloadsRequest{
				Parent: parent, PageSize: pageSize, PageToken: token, Filter: filter})
			if err != nil {
				t.Fatalf("ListWorkloads(%s, %q, page %d): %v", parent, filter, pages, err)
			}
			if pageSize > 0 && int32(len(resp.GetWorkloads())) > pageSize {
				t.Fatalf("page of %d workloads, want at most %d", len(resp.GetWorkloads()), pageSize)
			}
			pages++
			for _, w := range resp.GetWorkloads() {
				names = append(names, w.GetName())
			}
			if token = resp.GetNextPageToken(); token == "" {
				return names, pages
			}
		}
	}

	for name, tc := range map[string]struct {
		parent, filter string
		pageSize       int32
		wantNames      []string
		wantPages      int
	}{
		"every project in pages of two": {
			parent: "projects/-", pageSize: 2, wantNames: wantAll, wantPages: 3,
		},
		"every project in one page": {
			parent: "projects/-", pageSize: 0, wantNames: wantAll, wantPages: 1,
		},
		"one project in pages of one": {
			parent: "projects/team-b", pageSize: 1, wantNames: wantAll[3:], wantPages: 2,
		},
		"a project without workloads": {
			parent: "projects/team-c", pageSize: 10, wantNames: nil, wantPages: 1,
		},
		"a filter on the type across pages": {
			parent: "projects/-", filter: "type = INFERENCE", pageSize: 1,
			wantNames: []string{wantAll[1], wantAll[4]}, wantPages: 2,
		},
		"a filter joined by AND": {
			parent: "projects/-", filter: `type != WORKLOAD_TYPE_INFERENCE AND status.phase = PENDING AND spec.priority = "train"`, pageSize: 2,
			wantNames: []string{wantAll[0], wantAll[2], wantAll[3]}, wantPages: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			names, pages := listAll(t, tc.parent, tc.filter, tc.pageSize)
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if pages != tc.wantPages {
				t.Errorf("%d pages, want %d", pages, tc.wantPages)
			}
		})
	}

	first, err := e.client.ListWorkloads(ctx, &workloadv1.ListWorkloadsRequest{Parent: "projects/-", PageSize: 1, Filter: "type = TRAINING"})
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]*workloadv1.ListWorkloadsRequest{
		"a token that is not a token":         {Parent: "projects/-", PageToken: "nonsense"},
		"a token used with another parent":    {Parent: "projects/team-a", PageToken: first.GetNextPageToken(), Filter: "type = TRAINING"},
		"a token used with another filter":    {Parent: "projects/-", PageToken: first.GetNextPageToken(), Filter: "type = WORKSPACE"},
		"a token of a filter used without it": {Parent: "projects/-", PageToken: first.GetNextPageToken()},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.ListWorkloads(ctx, req)
			wantError(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")
		})
	}
	for name, tc := range map[string]struct {
		req        *workloadv1.ListWorkloadsRequest
		wantCode   codes.Code
		wantReason string
	}{
		"a parent that is not a project":   {&workloadv1.ListWorkloadsRequest{Parent: "team-a"}, codes.InvalidArgument, "INVALID_FIELD"},
		"a negative page size":             {&workloadv1.ListWorkloadsRequest{Parent: "projects/-", PageSize: -1}, codes.InvalidArgument, "INVALID_FIELD"},
		"a filter on an unsupported field": {&workloadv1.ListWorkloadsRequest{Parent: "projects/-", Filter: "spec.image = x"}, codes.InvalidArgument, "INVALID_FILTER"},
		"a project that does not exist":    {&workloadv1.ListWorkloadsRequest{Parent: "projects/nope"}, codes.NotFound, "PROJECT_NOT_FOUND"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.ListWorkloads(ctx, tc.req)
			wantError(t, err, tc.wantCode, tc.wantReason)
		})
	}
}

func TestCreateWorkload_UnknownProject(t *testing.T) {
	e := start(t)
	_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/nope", WorkloadId: "a1", Workload: training()})
	md := wantError(t, err, codes.NotFound, "PROJECT_NOT_FOUND")
	if md["project"] != "projects/nope" {
		t.Errorf("metadata %v, want project projects/nope", md)
	}
}

func TestCreateWorkload_Duplicate(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a", "team-b")
	first := e.create(t, "team-a", "a1", training())
	other := training()
	other.Spec.Image = "another"
	_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "a1", Workload: other})
	md := wantError(t, err, codes.AlreadyExists, "WORKLOAD_ALREADY_EXISTS")
	if md["workload"] != "projects/team-a/workloads/a1" {
		t.Errorf("metadata %v, want the workload's name", md)
	}
	got, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: first.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, got, protocmp.Transform()); diff != "" {
		t.Errorf("the first workload changed (-before +after):\n%s", diff)
	}
	// Ids are per project: the same id in another project is another workload.
	e.create(t, "team-b", "a1", training())
}

func TestDeleteWorkload_Etag(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()
	w := e.create(t, "team-a", "a1", training())
	suspended, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: w.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	for name, etag := range map[string]string{
		"the etag from before a change":  w.GetEtag(),
		"an etag that is not a revision": "W/\"x\"",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: w.GetName(), Etag: etag})
			md := wantError(t, err, codes.Aborted, "ETAG_MISMATCH")
			if md["etag"] != suspended.GetEtag() || md["name"] != w.GetName() {
				t.Errorf("metadata %v, want name %q and the current etag %q", md, w.GetName(), suspended.GetEtag())
			}
		})
	}
	if _, err := e.client.GetWorkload(ctx, &workloadv1.GetWorkloadRequest{Name: w.GetName()}); err != nil {
		t.Fatalf("the workload is gone after a refused delete: %v", err)
	}
	if _, err := e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: w.GetName(), Etag: suspended.GetEtag()}); err != nil {
		t.Fatalf("delete with the current etag: %v", err)
	}
}

func TestBadNames(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	for _, name := range []string{"", "a1", "projects/team-a/a1", "projects/-/workloads/a1", "projects/team-a/workloads/A1", "projects/team-a/workloads/a1/x"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			calls := map[string]error{}
			_, calls["get"] = e.client.GetWorkload(ctx, &workloadv1.GetWorkloadRequest{Name: name})
			_, calls["delete"] = e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: name})
			_, calls["suspend"] = e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: name})
			_, calls["resume"] = e.client.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: name})
			for call, err := range calls {
				wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
				if _, ok := violations(err)["name"]; !ok {
					t.Errorf("%s: violations %v, want one on name", call, violations(err))
				}
			}
		})
	}
}

// TestRejectedRequestsWriteNothing: after each rejected request the store is
// exactly as before, down to its revision.
func TestRejectedRequestsWriteNothing(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()
	w := e.create(t, "team-a", "a1", training())
	done := e.create(t, "team-a", "done", training())
	e.setPhase(t, done, workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED)
	bad := training()
	bad.Spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 1500}}

	for name, call := range map[string]func() error{
		"a create with a bad field": func() error {
			_, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "a2", Workload: bad})
			return err
		},
		"a create in an unknown project": func() error {
			_, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/nope", WorkloadId: "a2", Workload: training()})
			return err
		},
		"a duplicate create": func() error {
			_, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "a1", Workload: training()})
			return err
		},
		"a delete with a stale etag": func() error {
			_, err := e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: w.GetName(), Etag: "1"})
			return err
		},
		"a suspend with a stale etag": func() error {
			_, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: w.GetName(), Etag: "1"})
			return err
		},
		"a suspend of a completed workload": func() error {
			_, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: done.GetName()})
			return err
		},
		"a resume of a workload that does not exist": func() error {
			_, err := e.client.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: "projects/team-a/workloads/nope"})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			keys, rev := e.storeState(t)
			if err := call(); err == nil {
				t.Fatal("the request succeeded, want it rejected")
			}
			gotKeys, gotRev := e.storeState(t)
			if diff := cmp.Diff(keys, gotKeys); diff != "" || gotRev != rev {
				t.Errorf("store changed: revision %d → %d, keys (-before +after):\n%s", rev, gotRev, diff)
			}
		})
	}
}
