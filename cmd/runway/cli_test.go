package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// devServer is `runway dev` started from the built binary: a real process
// with an embedded etcd and two simulated nodes of two GPUs each.
type devServer struct {
	addr    string
	token   string // the bootstrap administrator's, from the RUNWAY_TOKEN line
	dataDir string
	cmd     *exec.Cmd
	logs    *syncBuffer // its stderr
}

// syncBuffer is a bytes.Buffer safe for the writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startDev(t *testing.T, flags ...string) *devServer {
	t.Helper()
	return startDevAt(t, t.TempDir(), nil, flags...)
}

// startDevAt starts runway dev on dataDir (again, after a first start),
// with env added to its environment. Its pods run as host processes unless
// flags say --runtime.
func startDevAt(t *testing.T, dataDir string, env []string, flags ...string) *devServer {
	t.Helper()
	if !slices.Contains(flags, "--runtime") {
		flags = append(flags, "--runtime", "process")
	}
	cmd := exec.Command(binary, append([]string{"dev", "--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--nodes", "2", "--gpus-per-node", "2", "--openapi", "../../gen/openapi/runway.swagger.json"}, flags...)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &devServer{cmd: cmd, dataDir: dataDir, logs: logs}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("runway dev did not stop on SIGTERM; its log:\n%s", logs.String())
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	// The first start prints the bootstrap administrator's one-time
	// password, then the RUNWAY_SERVER and RUNWAY_TOKEN lines.
	for d.addr == "" || d.token == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("runway dev printed no RUNWAY_SERVER and RUNWAY_TOKEN lines; log:\n%s", logs.String())
			}
			if addr, found := strings.CutPrefix(l, "export RUNWAY_SERVER="); found {
				d.addr = addr
			} else if tok, found := strings.CutPrefix(l, "export RUNWAY_TOKEN="); found {
				d.token = tok
			} else if !strings.HasPrefix(l, "bootstrap administrator users/admin") {
				t.Fatalf("runway dev printed %q; log:\n%s", l, logs.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("runway dev did not start in 60 s; log:\n%s", logs.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return d
}

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the CLI against the dev server as the administrator.
func (d *devServer) run(t *testing.T, args ...string) result {
	t.Helper()
	return d.session(t, d.token).run(t, "", args...)
}

// ok runs the CLI and fails the test unless it exits 0.
func (d *devServer) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := d.run(t, args...)
	if r.code != 0 {
		t.Fatalf("runway %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// eventually runs the CLI until its output is want (30 s at most: the
// scheduler runs a cycle each second).
func (d *devServer) eventually(t *testing.T, want string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		if got = d.ok(t, args...); got == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("runway %s printed\n%s\nwant\n%s", strings.Join(args, " "), got, want)
}

// The product's quick start typed as CLI commands: team-a borrows team-b's
// idle GPUs, then team-b's b2 takes its quota back and a1 goes back to
// pending. The list is the runai CLI's table, column for column.
func TestCLI_QuickStart(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "2")
	d.ok(t, "project", "create", "team-b", "--gpu", "2")
	submit := func(name, project, gpus string) {
		out := d.ok(t, "training", "submit", name, "-p", project, "-i", "runai.jfrog.io/demo/quickstart", "-g", gpus,
			"--cpu", "0.1", "--memory", "100M", "--", "sleep", "600")
		if want := `Training "` + name + `" submitted to project ` + project + "\n"; out != want {
			t.Errorf("submit printed %q, want %q", out, want)
		}
	}
	submit("a1", "team-a", "1")
	d.eventually(t, `Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
a1        Training  Running  team-a   1/1               1.00
`, "workload", "list", "-A")
	submit("a2", "team-a", "2")
	submit("b1", "team-b", "1")
	d.eventually(t, `Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
a1        Training  Running  team-a   1/1               1.00
a2        Training  Running  team-a   1/1               2.00
b1        Training  Running  team-b   1/1               1.00
`, "workload", "list", "-A")

	submit("b2", "team-b", "1")
	d.eventually(t, `Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
a2        Training  Running  team-a   1/1               2.00
b1        Training  Running  team-b   1/1               1.00
b2        Training  Running  team-b   1/1               1.00
a1        Training  Pending  team-a   0/1               1.00
`, "workload", "list", "-A")
	d.eventually(t, `Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
a2        Training  Running  team-a   1/1               2.00
a1        Training  Pending  team-a   0/1               1.00
`, "workload", "list", "-p", "team-a")
	d.eventually(t, `Project  Department  Node Pool  GPU Quota  Limit      Weight  Allocated  Fair Share
team-a   default     default    2.00       unlimited  1       2.00       2.00
team-b   default     default    2.00       unlimited  1       2.00       2.00
`, "project", "list")

	// -o json is the REST API's JSON form of the same workloads.
	var ws []struct {
		Name   string
		Type   string
		Status struct {
			Phase              string
			RunningPods        int
			AllocatedMilliGpus string // int64 is a string in protojson
			PreemptionCount    int
			PendingReasons     []struct {
				Check, NodePool, Message string
				NodeCount                int
				Requested                struct{ MilliGpus string }
			}
		}
	}
	if err := json.Unmarshal([]byte(d.ok(t, "workload", "list", "-A", "-o", "json")), &ws); err != nil {
		t.Fatal(err)
	}
	phases := map[string]string{}
	for _, w := range ws {
		phases[w.Name] = w.Status.Phase
		if w.Type != "WORKLOAD_TYPE_TRAINING" {
			t.Errorf("%s type %s", w.Name, w.Type)
		}
	}
	want := map[string]string{
		"projects/team-a/workloads/a1": "WORKLOAD_PHASE_PENDING", "projects/team-a/workloads/a2": "WORKLOAD_PHASE_RUNNING",
		"projects/team-b/workloads/b1": "WORKLOAD_PHASE_RUNNING", "projects/team-b/workloads/b2": "WORKLOAD_PHASE_RUNNING"}
	if len(phases) != 4 {
		t.Errorf("json list has %d workloads: %v", len(phases), phases)
	}
	for n, p := range want {
		if phases[n] != p {
			t.Errorf("%s phase %q, want %q", n, phases[n], p)
		}
	}
	checks := map[string]string{}
	for _, r := range ws[len(ws)-1].Status.PendingReasons {
		checks[r.Check] = r.NodePool
		if r.Check == "PENDING_CHECK_CAPACITY" && (r.NodeCount != 2 || r.Requested.MilliGpus != "1000") {
			t.Errorf("a1's capacity reason: %d nodes, %s milli-GPUs requested; want 2 and 1000", r.NodeCount, r.Requested.MilliGpus)
		}
	}
	if checks["PENDING_CHECK_CAPACITY"] != "nodepools/default" || checks["PENDING_CHECK_RECLAIM"] != "nodepools/default" {
		t.Errorf("a1's pending reasons %+v; want CAPACITY and RECLAIM checks in nodepools/default", ws[len(ws)-1].Status.PendingReasons)
	}
	if ws[len(ws)-1].Status.PreemptionCount != 1 || ws[0].Status.AllocatedMilliGpus != "2000" {
		t.Errorf("json: a1 preempted %d times (want 1), a2 holds %s milli-GPUs (want 2000)",
			ws[len(ws)-1].Status.PreemptionCount, ws[0].Status.AllocatedMilliGpus)
	}

	// describe tells why a1 waits and what happened to it.
	out := d.ok(t, "workload", "describe", "a1", "-p", "team-a")
	for _, s := range []string{"Status:     Pending (sent back to pending 1 time)", "Why it waits:", "fair share of 2",
		"Preempted  project team-b reclaimed 1 GPU: project team-a held"} {
		if !strings.Contains(out, s) {
			t.Errorf("describe lacks %q:\n%s", s, out)
		}
	}
	y := d.ok(t, "workload", "describe", "a1", "-p", "team-a", "-o", "yaml")
	if !strings.HasPrefix(y, "name: projects/team-a/workloads/a1\n") || !strings.Contains(y, "  phase: WORKLOAD_PHASE_PENDING\n") {
		t.Errorf("describe -o yaml:\n%s", y)
	}
	// Each kind lists its own.
	if out := d.ok(t, "workspace", "list", "-A"); out != "Workload  Type  Status  Project  Running/Req.Pods  GPU Alloc.\n" {
		t.Errorf("workspace list:\n%s", out)
	}
	if out := d.ok(t, "training", "list", "-p", "team-b"); !strings.Contains(out, "\nb1 ") || !strings.Contains(out, "\nb2 ") || strings.Count(out, "\n") != 3 {
		t.Errorf("training list -p team-b:\n%s", out)
	}

	// Shell completion asks the server for names.
	if out := d.ok(t, "__complete", "workload", "describe", "-p", "team-a", ""); !strings.HasPrefix(out, "a1\na2\n:4\n") {
		t.Errorf("completion of team-a's workloads:\n%s", out)
	}
	if out := d.ok(t, "__complete", "training", "submit", "x", "-p", ""); !strings.HasPrefix(out, "team-a\nteam-b\n:4\n") {
		t.Errorf("completion of projects:\n%s", out)
	}
	if out := d.ok(t, "node", "list"); !strings.Contains(out, "node-1  default    Ready   2     NVIDIA H100 80GB HBM3 (simulated)") {
		t.Errorf("node list:\n%s", out)
	}
}

// Bad input gets one readable line on stderr and a non-zero exit; nothing
// is created.
func TestCLI_BadInput(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "2")
	d.ok(t, "training", "submit", "a1", "-p", "team-a", "-i", "img", "-g", "1", "--", "sleep", "600")
	tests := []struct {
		name string
		args []string
		code int
		line string
	}{
		{"unknown project", []string{"training", "submit", "x", "-p", "nope", "-i", "img", "-g", "1"}, 1,
			`error: Project "projects/nope" does not exist; check the name. [PROJECT_NOT_FOUND]`},
		{"bad GPU value", []string{"training", "submit", "x", "-p", "team-a", "-i", "img", "-g", "1.5"}, 2,
			`error: bad GPU value "1.5": more than one GPU must be a whole number`},
		{"not a number", []string{"training", "submit", "x", "-p", "team-a", "-i", "img", "-g", "lots"}, 2,
			`error: bad GPU value "lots": want a number of GPUs (2) or a fraction of one (0.5)`},
		{"duplicate name", []string{"training", "submit", "a1", "-p", "team-a", "-i", "img", "-g", "1"}, 1,
			`error: Workload "projects/team-a/workloads/a1" already exists; choose another id. [WORKLOAD_ALREADY_EXISTS]`},
		{"describe unknown", []string{"workload", "describe", "zz", "-p", "team-a"}, 1,
			`error: Workload "projects/team-a/workloads/zz" does not exist; check the name. [WORKLOAD_NOT_FOUND]`},
		{"missing project flag", []string{"workload", "list"}, 2,
			`error: say which project (-p PROJECT) or all of them (-A)`},
		{"bad output format", []string{"workload", "list", "-A", "-o", "xml"}, 2,
			`error: unknown output format "xml" (want table, json or yaml)`},
		{"a master flag without a framework", []string{"training", "submit", "x", "-p", "team-a", "-i", "img", "--master-gpu", "1"}, 2,
			`error: --master-gpu is for a distributed training: give --framework too`},
		{"an unknown framework", []string{"training", "submit", "x", "-p", "team-a", "-i", "img", "--framework", "horovod", "--workers", "2"}, 2,
			`error: --framework "horovod": want pytorch, mpi, tensorflow, jax or xgboost`},
		{"a framework without workers", []string{"training", "submit", "x", "-p", "team-a", "-i", "img", "--framework", "jax"}, 2,
			`error: --workers N (1 or more) is required with --framework`},
		{"more minimum workers than workers", []string{"training", "submit", "x", "-p", "team-a", "-i", "img", "--framework", "pytorch", "--workers", "2", "--min-workers", "3"}, 2,
			`error: --min-workers 3: want 1 to --workers (2)`},
		{"an unknown restart policy", []string{"training", "submit", "x", "-p", "team-a", "-i", "img", "--framework", "pytorch", "--workers", "2", "--restart-policy", "always"}, 2,
			`error: --restart-policy "always": want never or on-failure`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := d.run(t, tc.args...)
			if r.code != tc.code || r.stderr != tc.line+"\n" || r.stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d and the one line %q", r.code, r.stderr, r.stdout, tc.code, tc.line)
			}
		})
	}
	if out := d.ok(t, "workload", "list", "-A"); strings.Count(out, "\n") != 2 {
		t.Errorf("after the bad submits, the list is\n%s\nwant only a1", out)
	}
	r := d.run(t, "workload", "list", "-A", "--server", "127.0.0.1:1")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: cannot reach the Runway server") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("no server: exit %d, stderr %q", r.code, r.stderr)
	}
}

// The same submit and list through REST (the gateway on the same port) and
// through the Go SDK, with the gateway's error body for bad requests.
func TestREST_AndSDK(t *testing.T) {
	d := startDev(t)
	base := "http://" + d.addr
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v", method, path, err)
		}
		return resp.StatusCode, m
	}
	if code, m := call("POST", "/v1/projects?projectId=team-a", `{"nodePoolQuotas":[{"nodePool":"nodepools/default","gpu":{"deservedMilliGpus":"2000"}}]}`); code != 200 {
		t.Fatalf("create project: %d %v", code, m)
	}
	code, m := call("POST", "/v1/projects/team-a/workloads?workloadId=r1",
		`{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"img","command":["sleep","600"],"gpu":{"devices":1}}}`)
	if code != 200 || m["name"] != "projects/team-a/workloads/r1" {
		t.Fatalf("REST submit: %d %v", code, m)
	}

	// The SDK sees the REST submit, and submits one of its own.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, sdk.Config{Server: d.addr, Token: d.token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SubmitWorkload(ctx, "team-a", "s1", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "img", Command: []string{"sleep", "600"},
			Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}}}); err != nil {
		t.Fatal(err)
	}
	for {
		ws, err := sdk.Collect(c.Workloads(ctx, "team-a", "status.phase = RUNNING"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 2 && ws[0].GetName() == "projects/team-a/workloads/r1" && ws[1].GetStatus().GetAllocatedMilliGpus() == 500 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("both workloads never ran: %v", ws)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.GetWorkload(ctx, "team-a", "nope"); !sdk.IsNotFound(err) || sdk.Reason(err) != "WORKLOAD_NOT_FOUND" {
		t.Errorf("SDK get of a missing workload: %v (reason %q)", err, sdk.Reason(err))
	}

	// REST list shows both, by name.
	code, m = call("GET", "/v1/projects/-/workloads", "")
	list, _ := m["workloads"].([]any)
	if code != 200 || len(list) != 2 {
		t.Fatalf("REST list: %d %v", code, m)
	}
	if n := list[1].(map[string]any)["name"]; n != "projects/team-a/workloads/s1" {
		t.Errorf("REST list second workload %v", n)
	}

	// Bad requests: the status code and the reason in the gateway's body.
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		reason                   string
	}{
		{"unknown project", "POST", "/v1/projects/nope/workloads?workloadId=x", `{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"i","gpu":{"devices":1}}}`, 404, "PROJECT_NOT_FOUND"},
		{"bad GPU value", "POST", "/v1/projects/team-a/workloads?workloadId=x", `{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"i","gpu":{"fractionMilli":1500}}}`, 400, "INVALID_FIELD"},
		{"duplicate name", "POST", "/v1/projects/team-a/workloads?workloadId=r1", `{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"i","gpu":{"devices":1}}}`, 409, "WORKLOAD_ALREADY_EXISTS"},
	} {
		code, m := call(tc.method, tc.path, tc.body)
		details, _ := m["details"].([]any)
		reason := ""
		for _, d := range details {
			if r, ok := d.(map[string]any)["reason"].(string); ok {
				reason = r
			}
		}
		if code != tc.code || reason != tc.reason || m["message"] == "" {
			t.Errorf("%s: HTTP %d reason %q, want %d %q; body %v", tc.name, code, reason, tc.code, tc.reason, m)
		}
	}
	if code, m := call("GET", "/openapi.json", ""); code != 200 || m["swagger"] != "2.0" {
		t.Errorf("GET /openapi.json: %d, swagger %v", code, m["swagger"])
	}
}

// Logs come from the agent of the pod's node, also after the pod ended;
// -f follows a running pod until it ends.
func TestCLI_Logs(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "2")
	d.ok(t, "training", "submit", "done", "-p", "team-a", "-i", "img", "-g", "1", "--", "sh", "-c", "echo one; echo two; echo three")
	d.ok(t, "training", "submit", "slow", "-p", "team-a", "-i", "img", "-g", "0.5", "--", "sh", "-c", "echo start; sleep 2; echo end")
	d.ok(t, "workspace", "submit", "never", "-p", "team-a", "-i", "img", "-g", "8", "--", "sleep", "1")

	// -f from the start: everything the pod writes, ending when it does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := d.run(t, "workload", "logs", "slow", "-p", "team-a", "-f")
		if r.code == 0 {
			if r.stdout != "start\nend\n" {
				t.Errorf("logs -f printed %q, want start and end", r.stdout)
			}
			break
		}
		if !strings.Contains(r.stderr, "[WORKLOAD_NO_LOGS]") || time.Now().After(deadline) {
			t.Fatalf("logs -f: exit %d, %s", r.code, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.eventually(t, "one\ntwo\nthree\n", "workload", "logs", "done", "-p", "team-a")
	if out := d.ok(t, "workload", "logs", "done", "-p", "team-a", "--tail", "2"); out != "two\nthree\n" {
		t.Errorf("--tail 2 printed %q", out)
	}
	r := d.run(t, "workload", "logs", "never", "-p", "team-a")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "[WORKLOAD_NO_LOGS]\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("logs of a workload that never ran: exit %d, %q", r.code, r.stderr)
	}

	// REST streams the same bytes as newline-delimited JSON.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+d.addr+"/v1/projects/team-a/workloads/done:logs", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []byte
	dec := json.NewDecoder(resp.Body)
	for {
		var line struct{ Result struct{ Data []byte } }
		if err := dec.Decode(&line); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got = append(got, line.Result.Data...)
	}
	if string(got) != "one\ntwo\nthree\n" {
		t.Errorf("REST logs %q", got)
	}
}
