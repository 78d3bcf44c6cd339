package server_test

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/auth"
	metricssvc "github.com/runwayhq/runway/services/metrics"
)

// researcher creates user id with the l1-researcher role in project and
// returns a connection with its token.
func researcher(t *testing.T, d *dev, id, project string) *grpc.ClientConn {
	t.Helper()
	admin, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(d.token)))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ids := identityv1.NewIdentityServiceClient(admin)
	if _, err := ids.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: id,
		User: &identityv1.User{Email: id + "@example.com", Password: id + "'s first password"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/" + id},
		Role:    "roles/l1-researcher", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/" + project}}}); err != nil {
		t.Fatal(err)
	}
	login, err := ids.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
		Password: &identityv1.PasswordCredentials{User: id, Password: id + "'s first password", NewPassword: id + "'s second password"}}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(login.GetAccessToken())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// readyCSV waits until the report is READY and returns its CSV's records.
func readyCSV(t *testing.T, rc metricsv1.ReportServiceClient, name string) [][]string {
	t.Helper()
	eventually(t, name+" READY", func() string {
		r, err := rc.GetReport(t.Context(), &metricsv1.GetReportRequest{Name: name})
		if err != nil {
			return err.Error()
		}
		if r.GetState() != metricsv1.ReportState_REPORT_STATE_READY {
			return r.String()
		}
		return ""
	})
	dl, err := rc.DownloadReport(t.Context(), &metricsv1.DownloadReportRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(dl.GetCsv())).ReadAll()
	if err != nil {
		t.Fatalf("CSV of %s: %v\n%s", name, err, dl.GetCsv())
	}
	return recs
}

// TestReports: after the quick start, the administrator's report by
// project has both teams' GPU-hours; a researcher of team-b may report on
// team-b only, sees only its own reports, and cannot read the
// administrator's.
func TestReports(t *testing.T) {
	start := time.Now().Add(-time.Second)
	d := startDev(t, t.TempDir(), 2, 2, func(c *server.DevConfig) {
		c.History = server.HistoryConfig{Interval: 50 * time.Millisecond}
	})
	quickStart(t, d)
	time.Sleep(300 * time.Millisecond) // a few gatherings of the final allocation
	admin, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(d.token)))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rc := metricsv1.NewReportServiceClient(admin)
	report := func(project string) *metricsv1.Report {
		return &metricsv1.Report{DisplayName: "quick start", StartTime: timestamppb.New(start), EndTime: timestamppb.Now(),
			SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT, Project: project}
	}
	all, err := rc.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "all", Report: report("")})
	if err != nil {
		t.Fatal(err)
	}
	if all.GetState() != metricsv1.ReportState_REPORT_STATE_PENDING || all.GetCreator() != "users/admin" {
		t.Errorf("created %v", all)
	}
	recs := readyCSV(t, rc, "reports/all")
	if len(recs) != 3 || recs[1][0] != "team-a" || recs[2][0] != "team-b" {
		t.Fatalf("rows %v, want a header, team-a and team-b", recs)
	}
	for _, r := range recs[1:] {
		if h, err := strconv.ParseFloat(r[2], 64); err != nil || h <= 0 {
			t.Errorf("%s GPU-hours allocated %q", r[0], r[2])
		}
	}

	bob := metricsv1.NewReportServiceClient(researcher(t, d, "bob", "team-b"))
	for _, p := range []string{"", "projects/team-a"} {
		if _, err := bob.CreateReport(t.Context(), &metricsv1.CreateReportRequest{Report: report(p)}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("bob's report over %q: %v, want PermissionDenied", p, err)
		}
	}
	mine, err := bob.CreateReport(t.Context(), &metricsv1.CreateReportRequest{Report: report("projects/team-b")})
	if err != nil {
		t.Fatal(err)
	}
	recs = readyCSV(t, bob, mine.GetName())
	if len(recs) != 2 || recs[1][0] != "team-b" {
		t.Errorf("bob's rows %v, want team-b's only", recs)
	}
	for what, err := range map[string]error{
		"get": func() error {
			_, err := bob.GetReport(t.Context(), &metricsv1.GetReportRequest{Name: "reports/all"})
			return err
		}(),
		"download": func() error {
			_, err := bob.DownloadReport(t.Context(), &metricsv1.DownloadReportRequest{Name: "reports/all"})
			return err
		}(),
		"delete": func() error {
			_, err := bob.DeleteReport(t.Context(), &metricsv1.DeleteReportRequest{Name: "reports/all"})
			return err
		}(),
	} {
		if status.Code(err) != codes.NotFound {
			t.Errorf("bob's %s of the administrator's report: %v, want NotFound", what, err)
		}
	}
	list, err := bob.ListReports(t.Context(), &metricsv1.ListReportsRequest{})
	if err != nil || len(list.GetReports()) != 1 || list.GetReports()[0].GetName() != mine.GetName() {
		t.Errorf("bob's list %v %v, want his report only", list, err)
	}
	list, err = rc.ListReports(t.Context(), &metricsv1.ListReportsRequest{PageSize: 1})
	if err != nil || len(list.GetReports()) != 1 || list.GetReports()[0].GetName() != mine.GetName() || list.GetNextPageToken() == "" {
		t.Fatalf("the administrator's first page %v %v, want bob's (newest)", list, err)
	}
	list, err = rc.ListReports(t.Context(), &metricsv1.ListReportsRequest{PageSize: 1, PageToken: list.GetNextPageToken()})
	if err != nil || len(list.GetReports()) != 1 || list.GetReports()[0].GetName() != "reports/all" || list.GetNextPageToken() != "" {
		t.Errorf("the administrator's second page %v %v, want reports/all, last", list, err)
	}

	// Bad input, and the delete.
	bad := report("")
	bad.EndTime = timestamppb.New(time.Now().Add(time.Hour))
	if _, err := rc.CreateReport(t.Context(), &metricsv1.CreateReportRequest{Report: bad}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a report ending in the future: %v, want InvalidArgument", err)
	}
	if _, err := bob.DeleteReport(t.Context(), &metricsv1.DeleteReportRequest{Name: mine.GetName()}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.GetReport(t.Context(), &metricsv1.GetReportRequest{Name: mine.GetName()}); status.Code(err) != codes.NotFound {
		t.Errorf("get after delete: %v", err)
	}
}

// adminReports is the report service of d, as its administrator.
func adminReports(t *testing.T, d *dev) metricsv1.ReportServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(d.token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return metricsv1.NewReportServiceClient(conn)
}

// A CSV whose report is gone (a delete that failed half-way, a
// computation that outran a delete) is swept when the service starts; the
// CSVs of live reports stay.
func TestReportsSweepOrphanCSVs(t *testing.T) {
	dir := t.TempDir()
	fast := func(c *server.DevConfig) { c.History = server.HistoryConfig{Interval: 50 * time.Millisecond} }
	t.Run("first start", func(t *testing.T) {
		rc := adminReports(t, startDev(t, dir, 1, 1, fast))
		_, err := rc.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "kept", Report: &metricsv1.Report{DisplayName: "kept",
			StartTime: timestamppb.New(time.Now().Add(-time.Minute)), EndTime: timestamppb.Now(),
			SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT}})
		if err != nil {
			t.Fatal(err)
		}
		readyCSV(t, rc, "reports/kept")
	})
	orphan := filepath.Join(dir, "blobs", "reports", "gone.csv")
	if err := os.WriteFile(orphan, []byte("segment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("second start", func(t *testing.T) {
		rc := adminReports(t, startDev(t, dir, 1, 1, fast))
		eventually(t, "the orphan CSV swept", func() string {
			if _, err := os.Stat(orphan); err == nil {
				return orphan + " is still there"
			}
			return ""
		})
		if _, err := rc.DownloadReport(t.Context(), &metricsv1.DownloadReportRequest{Name: "reports/kept"}); err != nil {
			t.Errorf("the live report's CSV: %v", err)
		}
	})
}

// A stored CSV larger than one download carries (a bucket written by
// something else) is refused, FAILED_PRECONDITION with the limit, and not
// read into memory.
func TestReportTooLargeToDownload(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 1, 1, func(c *server.DevConfig) { c.History = server.HistoryConfig{Interval: 50 * time.Millisecond} })
	rc := adminReports(t, d)
	if _, err := rc.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "big", Report: &metricsv1.Report{DisplayName: "big",
		StartTime: timestamppb.New(time.Now().Add(-time.Minute)), EndTime: timestamppb.Now(),
		SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT}}); err != nil {
		t.Fatal(err)
	}
	readyCSV(t, rc, "reports/big")
	stored := filepath.Join(dir, "blobs", "reports", "big.csv")
	if err := os.WriteFile(stored, []byte(strings.Repeat("x", metricssvc.MaxCSVBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := rc.DownloadReport(t.Context(), &metricsv1.DownloadReportRequest{Name: "reports/big"})
	if s, _ := status.FromError(err); s.Code() != codes.FailedPrecondition || !strings.Contains(s.Message(), strconv.Itoa(metricssvc.MaxCSVBytes)) {
		t.Errorf("downloading a stored CSV over %d bytes: %v, want FailedPrecondition naming the limit", metricssvc.MaxCSVBytes, err)
	}
}
