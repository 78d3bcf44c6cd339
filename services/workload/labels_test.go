package workload_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

func labelled(labels, annotations map[string]string) *workloadv1.Workload {
	w := training()
	w.Labels, w.Annotations = labels, annotations
	return w
}

// Labels are kept as submitted and select workloads in list and watch
// filters; a workload without the label is not matched by =, and is by !=.
func TestLabels_SelectInListAndWatch(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()
	got := e.create(t, "team-a", "v1", labelled(map[string]string{"team": "vision", "example.com/stage": "test"}, map[string]string{"note": "first try; lr 0.1"}))
	if got.GetLabels()["team"] != "vision" || got.GetAnnotations()["note"] != "first try; lr 0.1" {
		t.Errorf("created %v, want its labels and annotations", got)
	}
	e.create(t, "team-a", "v2", labelled(map[string]string{"team": "vision"}, nil))
	e.create(t, "team-a", "n1", labelled(map[string]string{"team": "nlp"}, nil))
	e.create(t, "team-a", "bare", training())

	for filter, want := range map[string]string{
		`labels.team = "vision"`:                                     "v1,v2",
		`labels.team = vision AND labels.example.com/stage = "test"`: "v1",
		`labels.team != "vision"`:                                    "bare,n1",
		`labels.team != ""`:                                          "n1,v1,v2",
		`labels.team = "vision" AND type = TRAINING`:                 "v1,v2",
	} {
		resp, err := e.client.ListWorkloads(ctx, &workloadv1.ListWorkloadsRequest{Parent: "projects/team-a", Filter: filter})
		if err != nil {
			t.Fatalf("%s: %v", filter, err)
		}
		var ids []string
		for _, w := range resp.GetWorkloads() {
			ids = append(ids, w.GetName()[strings.LastIndex(w.GetName(), "/")+1:])
		}
		if got := strings.Join(slices.Sorted(slices.Values(ids)), ","); got != want {
			t.Errorf("%s: %s, want %s", filter, got, want)
		}
	}
	_, err := e.client.ListWorkloads(ctx, &workloadv1.ListWorkloadsRequest{Parent: "projects/team-a", Filter: `labels.-bad = "x"`})
	wantError(t, err, codes.InvalidArgument, "INVALID_FILTER")

	stream, cancel := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a", Filter: `labels.team = "nlp"`})
	defer cancel()
	next(t, stream, added, name("team-a", "n1"))
	next(t, stream, synced, "")
	e.create(t, "team-a", "v3", labelled(map[string]string{"team": "vision"}, nil))
	e.create(t, "team-a", "n2", labelled(map[string]string{"team": "nlp"}, nil))
	next(t, stream, added, name("team-a", "n2")) // v3 never arrives
}

// Labels and annotations are bounded and checked, each violation naming
// its key; the platform's prefixes are refused.
func TestLabels_Validated(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	many, big := map[string]string{}, map[string]string{}
	for i := range 65 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for i := range 64 { // each value at the 4 KiB a string may hold, over 256 KiB in all
		big[fmt.Sprintf("k%d", i)] = strings.Repeat("x", 4096)
	}
	for _, tc := range []struct {
		labels, annotations map[string]string
		field               string
	}{
		{many, nil, "workload.labels"},
		{map[string]string{"-team": "x"}, nil, "workload.labels[-team]"},
		{map[string]string{"team": "has space"}, nil, "workload.labels[team]"},
		{map[string]string{"runway.dev/mark": "x"}, nil, "workload.labels[runway.dev/mark]"},
		{map[string]string{"node.kubernetes.io/x": "x"}, nil, "workload.labels[node.kubernetes.io/x]"},
		{map[string]string{"runway.io/workload": "x"}, nil, "workload.labels[runway.io/workload]"},
		{map[string]string{"io.runway.project": "x"}, nil, "workload.labels[io.runway.project]"},
		{map[string]string{"Bad_Prefix/x": "x"}, nil, "workload.labels[Bad_Prefix/x]"},
		{nil, big, "workload.annotations"},
		{nil, map[string]string{"run.ai/x": "free text is fine, the key is not"}, "workload.annotations[run.ai/x]"},
	} {
		_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "x",
			Workload: labelled(tc.labels, tc.annotations)})
		wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
		if v := violations(err); v[tc.field] == "" {
			t.Errorf("violations %v, want %s", v, tc.field)
		}
	}
}
