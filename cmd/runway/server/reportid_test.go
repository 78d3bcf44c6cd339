package server_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/cmd/runway/server"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

// A report id in use by a report its caller may not see answers as an id
// the caller cannot use, never "already exists" with the other user's
// report's name: bob learns nothing of alice's reports. His own taken id
// is AlreadyExists, as before.
func TestReportIDOfAnotherUserDisclosesNothing(t *testing.T) {
	d := startDev(t, t.TempDir(), 0, 0, func(c *server.DevConfig) {
		c.History = server.HistoryConfig{Interval: 50 * time.Millisecond}
	})
	for _, p := range []string{"team-a", "team-b"} {
		if _, err := d.quota.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: p, Project: &quotav1.Project{}}); err != nil {
			t.Fatal(err)
		}
	}
	report := func(project string) *metricsv1.Report {
		return &metricsv1.Report{DisplayName: "q3", StartTime: timestamppb.New(time.Now().Add(-time.Hour)), EndTime: timestamppb.Now(),
			SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT, Project: project}
	}
	alice := metricsv1.NewReportServiceClient(researcher(t, d, "alice", "team-a"))
	bob := metricsv1.NewReportServiceClient(researcher(t, d, "bob", "team-b"))
	if _, err := alice.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "q3", Report: report("projects/team-a")}); err != nil {
		t.Fatal(err)
	}
	_, err := bob.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "q3", Report: report("projects/team-b")})
	if status.Code(err) != codes.InvalidArgument || strings.Contains(err.Error(), "reports/q3") || strings.Contains(strings.ToLower(err.Error()), "exist") ||
		!strings.Contains(err.Error(), "report_id") {
		t.Errorf("bob's report q3 while alice holds one: %v, want InvalidArgument on report_id naming no report", err)
	}
	if _, err := bob.GetReport(t.Context(), &metricsv1.GetReportRequest{Name: "reports/q3"}); status.Code(err) != codes.NotFound {
		t.Errorf("bob's GetReport of alice's q3: %v, want NotFound", err)
	}
	if _, err := bob.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "b1", Report: report("projects/team-b")}); err != nil {
		t.Fatal(err)
	}
	_, err = bob.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "b1", Report: report("projects/team-b")})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("bob's second b1: %v, want AlreadyExists", err)
	}
}
