package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/auth"
)

// last is the last point of the first series of type typ (and pod, when
// given); NaN-free by construction, -1 when there is none.
func last(m *metricsv1.Metrics, typ metricsv1.MetricType, pod ...string) float64 {
	for _, s := range m.GetSeries() {
		if s.GetType() == typ && (len(pod) == 0 || s.GetPod() == pod[0]) && len(s.GetPoints()) > 0 {
			return s.GetPoints()[len(s.GetPoints())-1].GetValue()
		}
	}
	return -1
}

// TestMetricsAPI plays the quick start with a fast history and reads it
// back through the MetricsService: each entity's series end at the quick
// start's values, the telemetry shows the cluster now, and a researcher of
// team-b reads team-b's metrics but not team-a's, over gRPC and REST.
func TestMetricsAPI(t *testing.T) {
	start := time.Now().Add(-time.Second)
	d := startDev(t, t.TempDir(), 2, 2, func(c *server.DevConfig) {
		c.History = server.HistoryConfig{Interval: 50 * time.Millisecond}
	})
	quickStart(t, d)
	conn, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(d.token)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mc := metricsv1.NewMetricsServiceClient(conn)
	window := func() (*timestamppb.Timestamp, *timestamppb.Timestamp) {
		return timestamppb.New(start), timestamppb.New(time.Now())
	}
	const (
		allocated = metricsv1.MetricType_METRIC_TYPE_ALLOCATED_GPUS
		quota     = metricsv1.MetricType_METRIC_TYPE_GPU_QUOTA
		total     = metricsv1.MetricType_METRIC_TYPE_TOTAL_GPUS
		util      = metricsv1.MetricType_METRIC_TYPE_GPU_UTILIZATION
		fairShare = metricsv1.MetricType_METRIC_TYPE_FAIR_SHARE_GPUS
	)
	eventually(t, "each entity's series at the quick start's values", func() string {
		s, e := window()
		checks := []struct {
			what string
			get  func() (*metricsv1.Metrics, error)
			typ  metricsv1.MetricType
			want float64
		}{
			{"team-a allocated", func() (*metricsv1.Metrics, error) {
				return mc.QueryProjectMetrics(t.Context(), &metricsv1.QueryProjectMetricsRequest{Name: "projects/team-a", StartTime: s, EndTime: e, StepSeconds: 1})
			}, allocated, 2},
			{"team-a quota", func() (*metricsv1.Metrics, error) {
				return mc.QueryProjectMetrics(t.Context(), &metricsv1.QueryProjectMetricsRequest{Name: "projects/team-a", StartTime: s, EndTime: e, StepSeconds: 1})
			}, quota, 2},
			{"a2 allocated", func() (*metricsv1.Metrics, error) {
				return mc.QueryWorkloadMetrics(t.Context(), &metricsv1.QueryWorkloadMetricsRequest{Name: "projects/team-a/workloads/a2", StartTime: s, EndTime: e, StepSeconds: 1})
			}, allocated, 2},
			{"default department allocated", func() (*metricsv1.Metrics, error) {
				return mc.QueryDepartmentMetrics(t.Context(), &metricsv1.QueryDepartmentMetricsRequest{Name: "departments/default", StartTime: s, EndTime: e, StepSeconds: 1})
			}, allocated, 4},
			{"pool total", func() (*metricsv1.Metrics, error) {
				return mc.QueryNodePoolMetrics(t.Context(), &metricsv1.QueryNodePoolMetricsRequest{Name: "nodepools/default", StartTime: s, EndTime: e, StepSeconds: 1})
			}, total, 4},
			{"pool quota", func() (*metricsv1.Metrics, error) {
				return mc.QueryNodePoolMetrics(t.Context(), &metricsv1.QueryNodePoolMetricsRequest{Name: "nodepools/default", StartTime: s, EndTime: e, StepSeconds: 1})
			}, quota, 4},
			{"node-1 allocated", func() (*metricsv1.Metrics, error) {
				return mc.QueryNodeMetrics(t.Context(), &metricsv1.QueryNodeMetricsRequest{Name: "nodes/node-1", StartTime: s, EndTime: e, StepSeconds: 1})
			}, allocated, 2},
			{"cluster allocated", func() (*metricsv1.Metrics, error) {
				return mc.QueryClusterMetrics(t.Context(), &metricsv1.QueryClusterMetricsRequest{Name: "cluster", StartTime: s, EndTime: e, StepSeconds: 1})
			}, allocated, 4},
			{"default department fair share", func() (*metricsv1.Metrics, error) {
				return mc.QueryDepartmentMetrics(t.Context(), &metricsv1.QueryDepartmentMetricsRequest{Name: "departments/default", StartTime: s, EndTime: e, StepSeconds: 1})
			}, fairShare, 4},
			{"pool fair share", func() (*metricsv1.Metrics, error) {
				return mc.QueryNodePoolMetrics(t.Context(), &metricsv1.QueryNodePoolMetricsRequest{Name: "nodepools/default", StartTime: s, EndTime: e, StepSeconds: 1})
			}, fairShare, 4},
		}
		for _, c := range checks {
			m, err := c.get()
			if err != nil {
				return c.what + ": " + err.Error()
			}
			if got := last(m, c.typ); got != c.want {
				return fmt.Sprintf("%s = %v, want %v (%v)", c.what, got, c.want, m.GetSeries())
			}
		}
		m, err := mc.QueryWorkloadMetrics(t.Context(), &metricsv1.QueryWorkloadMetricsRequest{Name: "projects/team-a/workloads/a2", StartTime: s, EndTime: e, StepSeconds: 1})
		if err != nil {
			return err.Error()
		}
		if got := last(m, util, "0"); got < 0 || got > 1 {
			return fmt.Sprintf("a2 pod 0 utilisation %v", got)
		}
		// After the reclaim, team-a's fair share over time ends at the
		// scheduler's own number for the queue (2 GPUs).
		q, err := d.scheduler.GetQueue(t.Context(), &schedulerv1.GetQueueRequest{Name: "projects/team-a/queue"})
		if err != nil {
			return err.Error()
		}
		want := float64(pool(q).GetFairShare().GetMilliGpus()) / 1000
		m, err = mc.QueryProjectMetrics(t.Context(), &metricsv1.QueryProjectMetricsRequest{Name: "projects/team-a", StartTime: s, EndTime: e, StepSeconds: 1})
		if err != nil {
			return err.Error()
		}
		if got := last(m, fairShare); want != 2 || got != want {
			return fmt.Sprintf("team-a fair share %v over time, %v from the scheduler, want both 2", got, want)
		}
		return ""
	})
	eventually(t, "the telemetry of now", func() string {
		tel, err := mc.GetTelemetry(t.Context(), &metricsv1.GetTelemetryRequest{Name: "telemetry"})
		if err != nil {
			return err.Error()
		}
		want := &metricsv1.NodePoolTelemetry{NodePool: "nodepools/default", AllocatedGpus: 4, ReadyNodes: 2, RunningWorkloads: 3}
		if ps := tel.GetNodePools(); len(ps) != 1 || !proto.Equal(ps[0], want) {
			return fmt.Sprint("pools ", ps)
		}
		if len(tel.GetProjects()) != 2 {
			return fmt.Sprint("projects ", tel.GetProjects())
		}
		a := tel.GetProjects()[0]
		if a.GetProject() != "projects/team-a" || a.GetAllocatedGpus() != 2 || a.GetGpuQuota() != 2 ||
			a.GetRunningWorkloads() != 1 || a.GetPendingWorkloads() != 1 {
			return "team-a " + a.String()
		}
		return ""
	})

	// A researcher of team-b.
	ids := identityv1.NewIdentityServiceClient(conn)
	if _, err := ids.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "bob",
		User: &identityv1.User{Email: "bob@example.com", Password: "bob's first password"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/bob"},
		Role:    "roles/l1-researcher", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-b"}}}); err != nil {
		t.Fatal(err)
	}
	login, err := ids.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
		Password: &identityv1.PasswordCredentials{User: "bob", Password: "bob's first password", NewPassword: "bob's second password"}}})
	if err != nil {
		t.Fatal(err)
	}
	bconn, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(login.GetAccessToken())))
	if err != nil {
		t.Fatal(err)
	}
	defer bconn.Close()
	bob := metricsv1.NewMetricsServiceClient(bconn)
	eventually(t, "bob reads team-b's metrics", func() string {
		m, err := bob.QueryProjectMetrics(t.Context(), &metricsv1.QueryProjectMetricsRequest{Name: "projects/team-b"})
		if err != nil {
			return err.Error()
		}
		if got := last(m, allocated); got != 2 {
			return fmt.Sprintf("team-b allocated %v", got)
		}
		if got := last(m, fairShare); got != 2 {
			return fmt.Sprintf("team-b fair share %v", got)
		}
		return ""
	})
	for what, call := range map[string]func() error{
		"team-a's project metrics": func() error {
			_, err := bob.QueryProjectMetrics(t.Context(), &metricsv1.QueryProjectMetricsRequest{Name: "projects/team-a"})
			return err
		},
		"a2's metrics": func() error {
			_, err := bob.QueryWorkloadMetrics(t.Context(), &metricsv1.QueryWorkloadMetricsRequest{Name: "projects/team-a/workloads/a2"})
			return err
		},
		"the cluster's metrics": func() error {
			_, err := bob.QueryClusterMetrics(t.Context(), &metricsv1.QueryClusterMetricsRequest{Name: "cluster"})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("bob reads %s: %v, want PermissionDenied", what, err)
		}
	}
	tel, err := bob.GetTelemetry(t.Context(), &metricsv1.GetTelemetryRequest{Name: "telemetry"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tel.GetProjects()) != 1 || tel.GetProjects()[0].GetProject() != "projects/team-b" {
		t.Errorf("bob's telemetry shows projects %v, want team-b only", tel.GetProjects())
	}

	// Too many points, and a bad name.
	_, err = mc.QueryClusterMetrics(t.Context(), &metricsv1.QueryClusterMetricsRequest{Name: "cluster",
		StartTime: timestamppb.New(time.Now().Add(-24 * time.Hour)), StepSeconds: 1})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("86400 points: %v, want InvalidArgument", err)
	}
	_, err = mc.QueryProjectMetrics(t.Context(), &metricsv1.QueryProjectMetricsRequest{Name: `projects/x"}`})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a quoted name: %v, want InvalidArgument", err)
	}

	// REST: the same call, and the same refusal.
	for _, c := range []struct {
		path string
		want int
	}{{"/v1/projects/team-b/metrics", http.StatusOK}, {"/v1/projects/team-a/metrics", http.StatusForbidden}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+d.addr+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+login.GetAccessToken())
		resp, err := plainHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s: %d %v, want %d", c.path, resp.StatusCode, body, c.want)
		}
		if c.want == http.StatusOK {
			series, _ := body["series"].([]any)
			if body["name"] != "projects/team-b" || !slices.ContainsFunc(series, func(s any) bool {
				return s.(map[string]any)["type"] == "METRIC_TYPE_ALLOCATED_GPUS"
			}) {
				t.Errorf("GET %s: %v", c.path, body)
			}
		}
	}
}
