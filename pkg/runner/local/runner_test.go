package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/local"
)

func TestMain(m *testing.M) {
	if os.Getenv(firstRunnerEnv) != "" {
		os.Exit(firstRunner())
	}
	goleak.VerifyTestMain(m)
}

func newRunner(t *testing.T, grace time.Duration) *local.Runner {
	t.Helper()
	r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: grace, UIDs: local.DefaultUIDs})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitDone waits for the process to exit, failing the test after 10 s.
func waitDone(t *testing.T, p runner.Pod) local.Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(10 * time.Second):
		p.Stop(context.Background())
		t.Fatal("process did not exit within 10 s")
		return local.Exit{}
	}
}

// eventually polls cond every 10 ms until it holds, failing after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestRunner_exitCodeAndEnv(t *testing.T) {
	r := newRunner(t, time.Second)
	p, err := r.Start(local.Spec{
		ID:             "team-a.train-1.0",
		Command:        []string{"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES|$RUNWAY_WORKLOAD|$RUNWAY_PROJECT|$RUNWAY_POD_INDEX|$RUNWAY_GPU_FRACTION_MILLI|$RUNWAY_GPU_MEMORY_LIMIT_BYTES|$EXTRA" > env.txt; echo to-log; echo to-err >&2; exit 3`},
		Env:            []string{"EXTRA=x"},
		Workload:       "projects/team-a/workloads/train-1",
		Project:        "team-a",
		Pod:            2,
		Devices:        []int{1, 3},
		FractionMilli:  500,
		GPUMemoryBytes: 1 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	ex := waitDone(t, p)
	if ex != (local.Exit{Code: 3}) {
		t.Errorf("exit = %+v, want code 3", ex)
	}
	env, err := os.ReadFile(filepath.Join(p.Dir(), "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := "1,3|projects/team-a/workloads/train-1|team-a|2|500|1073741824|x\n"
	if string(env) != want {
		t.Errorf("env = %q, want %q", env, want)
	}
	log, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if string(log) != "to-log\nto-err\n" {
		t.Errorf("log = %q", log)
	}
}

func TestRunner_success(t *testing.T) {
	p, err := newRunner(t, time.Second).Start(local.Spec{ID: "p", Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p); ex != (local.Exit{}) {
		t.Errorf("exit = %+v, want code 0", ex)
	}
}

func TestRunner_startErrors(t *testing.T) {
	r := newRunner(t, time.Second)
	for name, spec := range map[string]local.Spec{
		"empty command":      {ID: "p"},
		"id with a slash":    {ID: "../p", Command: []string{"true"}},
		"missing executable": {ID: "p", Command: []string{"/nonexistent/runway-test"}},
	} {
		if _, err := r.Start(spec); err == nil {
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the ")" that ends the command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func startWithChild(t *testing.T, r *local.Runner, script string) (runner.Pod, int) {
	t.Helper()
	p, err := r.Start(local.Spec{ID: "p", Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	var child int
	eventually(t, "the child's pid file", func() bool {
		b, err := os.ReadFile(filepath.Join(p.Dir(), "child"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	return p, child
}

func TestProcess_StopKillsChildren(t *testing.T) {
	r := newRunner(t, 5*time.Second)
	p, child := startWithChild(t, r, `sleep 60 & echo $! > child.tmp; mv child.tmp child; wait`)
	p.Stop(context.Background())
	ex := p.Exit()
	if !ex.Stopped || !ex.Signaled || ex.Code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit = %+v, want stopped by SIGTERM", ex)
	}
	eventually(t, "the child to die", func() bool { return !alive(child) })
}

func TestProcess_StopKillsAfterGrace(t *testing.T) {
	r := newRunner(t, 200*time.Millisecond)
	p, child := startWithChild(t, r, `trap '' TERM; sleep 60 & echo $! > child.tmp; mv child.tmp child; wait; wait`)
	p.Stop(context.Background())
	if ex := p.Exit(); !ex.Stopped || ex.Code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit = %+v, want stopped by SIGKILL", ex)
	}
	eventually(t, "the child to die", func() bool { return !alive(child) })
}

// firstRunnerEnv makes the test binary the first runner of
// TestStart_adoptsAcrossRunners: a process of its own, SIGKILLed as an
// agent is.
const firstRunnerEnv = "RUNWAY_TEST_FIRST_RUNNER"

// firstRun is what the first runner is asked to do.
type firstRun struct {
	DataDir, Cgroup string
	Specs           []local.Spec
	Wait            []bool // wait for that pod's end before saying ready
}

// firstRunner starts the pods of firstRun (JSON in firstRunnerEnv),
// prints "ID PID" for each and "ready", then waits to be killed.
func firstRunner() int {
	var fr firstRun
	if err := json.Unmarshal([]byte(os.Getenv(firstRunnerEnv)), &fr); err != nil {
		fmt.Println(err)
		return 1
	}
	r, err := local.New(local.Config{DataDir: fr.DataDir, Cgroup: fr.Cgroup, UIDs: local.DefaultUIDs})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for i, spec := range fr.Specs {
		p, err := r.Start(spec)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		if fr.Wait[i] {
			<-p.Done()
		}
		fmt.Println(spec.ID, p.Pid())
	}
	fmt.Println("ready")
	select {}
}

// A runner on the same directory as one that was SIGKILLed (its agent
// killed with kill -9) adopts the pods it left, whichever way each follows
// pods (a cgroup per pod, or its session): a running pod is followed, not
// run again, and its exit is the shim's; one that ended meanwhile gives
// its exit; one of another revision is killed and started anew; one that
// died with no exit recorded (its shim killed with it, as a node's end
// does) is started again (Restarted); Reap ends those not bound.
func TestStart_adoptsAcrossRunners(t *testing.T) {
	for _, mode := range []string{"", "none"} {
		t.Run(fmt.Sprintf("cgroup %q", mode), func(t *testing.T) {
			dir := t.TempDir()
			counts = ledgerDir(t)
			spec := func(id string, rev int64, script string) local.Spec {
				pod, _ := strconv.Atoi(strings.TrimPrefix(id, "u."))
				return local.Spec{ID: id, Revision: rev, Project: "team-a", Workload: "projects/team-a/workloads/w", Pod: pod,
					Command: []string{"sh", "-c", script}, Env: []string{"COUNT=" + filepath.Join(counts, id)}}
			}
			const counted = `echo ran >> "$COUNT"; `
			specs := []local.Spec{
				spec("u.0", 5, counted+`while [ ! -e go ]; do sleep 0.05; done; exit 4`),
				spec("u.1", 5, counted+`exit 7`),
				spec("u.2", 5, counted+`exec sleep 600`),
				spec("u.3", 5, counted+`exec sleep 600`),
				spec("u.4", 5, `exec sleep 600`),
			}
			pids := runFirst(t, firstRun{DataDir: dir, Cgroup: mode, Specs: specs, Wait: []bool{false, true, false, false, false}})
			for _, id := range []string{"u.0", "u.2", "u.3"} {
				eventually(t, id+"'s first line", func() bool { return ranTimes(id) == 1 })
			}
			// u.3 dies with its node: its shim and its process.
			killShimOf(t, dir, "u.3")
			_ = syscall.Kill(pids["u.3"], syscall.SIGKILL)

			second, err := local.New(local.Config{DataDir: dir, Cgroup: mode, UIDs: local.DefaultUIDs})
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			// As the agent does after its first look at the bindings.
			second.Reap(func(project, workload string, pod int) bool {
				return project == "team-a" && workload == "w" && pod != 4
			})
			restarting := map[string]int{} // by pod: its runs when Restarting was called
			start := func(s local.Spec) runner.Pod {
				t.Helper()
				s.Restarting = func() {
					time.Sleep(300 * time.Millisecond) // a run started already would have written its line
					restarting[s.ID] = ranTimes(s.ID)
				}
				p, err := second.Start(s)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Kill() })
				return p
			}
			q := start(specs[0])
			if q.Origin() != runner.Adopted || q.Pid() != pids["u.0"] {
				t.Errorf("u.0: origin %v, pid %d; want adopted, pid %d", q.Origin(), q.Pid(), pids["u.0"])
			}
			d := start(specs[1])
			moved := specs[2]
			moved.Revision = 6
			m := start(moved)
			re := start(specs[3])
			eventually(t, "the unbound pod ended by Reap", func() bool { return !alive(pids["u.4"]) })
			if ex := waitDone(t, d); d.Origin() != runner.Adopted || ex.Code != 7 || ranTimes("u.1") != 1 {
				t.Errorf("u.1: origin %v, exit %+v, ran %d times; want adopted, 7, once", d.Origin(), ex, ranTimes("u.1"))
			}
			if m.Origin() != runner.Started || alive(pids["u.2"]) {
				t.Errorf("u.2 of another revision: origin %v, the old run alive %v; want started, the old one killed", m.Origin(), alive(pids["u.2"]))
			}
			if re.Origin() != runner.Restarted {
				t.Errorf("u.3 died with its node: origin %v, want restarted", re.Origin())
			}
			if n, ok := restarting["u.3"]; !ok || n != 1 || len(restarting) != 1 {
				t.Errorf("Restarting called for %v (pod: its runs then), want u.3 alone, before it ran again", restarting)
			}
			for _, id := range []string{"u.2", "u.3"} {
				eventually(t, id+" started again", func() bool { return ranTimes(id) == 2 })
			}
			if err := os.WriteFile(filepath.Join(q.Dir(), "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if ex := waitDone(t, q); ex != (local.Exit{Code: 4}) || ranTimes("u.0") != 1 {
				t.Errorf("the adopted pod: exit %+v, ran %d times; want 4, once", ex, ranTimes("u.0"))
			}
		})
	}
}

// runFirst runs the first runner as a process, waits for its pods and
// SIGKILLs it; it returns each pod's first pid.
func runFirst(t *testing.T, fr firstRun) map[string]int {
	t.Helper()
	b, err := json.Marshal(fr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), firstRunnerEnv+"="+string(b))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		var id string
		var pid int
		if _, err := fmt.Sscan(sc.Text(), &id, &pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the first runner: %s", sc.Text())
		}
		pids[id] = pid
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(pids) != len(fr.Specs) {
		t.Fatalf("the first runner started %v of %d pods", pids, len(fr.Specs))
	}
	return pids
}

// A pod that an earlier runner left running keeps its own uid: no pod the
// new runner starts shares it (it could read the first's files and
// signal it).
func TestStart_adoptedPodKeepsItsUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the uid range needs root (the agent runs pods as root does)")
	}
	dir := t.TempDir()
	uids := local.UIDRange{First: 2_000_000_000, Last: 2_000_000_001}
	first, err := local.New(local.Config{DataDir: dir, UIDs: uids})
	if err != nil {
		t.Fatal(err)
	}
	p, err := first.Start(local.Spec{ID: "a.0", Command: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	second, err := local.New(local.Config{DataDir: dir, UIDs: uids})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	b, err := second.Start(local.Spec{ID: "b.0", Command: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill()
	if ua, ub := uidOf(t, p.Pid()), uidOf(t, b.Pid()); ua == ub {
		t.Errorf("the new pod runs as %s, the uid of the pod left running", ub)
	}
	if c, err := second.Start(local.Spec{ID: "c.0", Command: []string{"sleep", "600"}}); err == nil {
		c.Kill()
		t.Error("a third pod started with both uids of the range held")
	}
}

func uidOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			return strings.Fields(v)[0]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}

// counts is the directory of the pods' count files: outside their
// working directories (given back to root between runs), writable by
// every pod's user.
var counts string

func ledgerDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "runway-local-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// ranTimes counts the lines of pod id's count file.
func ranTimes(id string) int {
	b, _ := os.ReadFile(filepath.Join(counts, id))
	return strings.Count(string(b), "ran\n")
}

// killShimOf SIGKILLs the shim of pod id, as the end of its node would.
func killShimOf(t *testing.T, dir, id string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id, local.RunName))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Shim int }
	if err := json.Unmarshal(b, &rec); err != nil || rec.Shim <= 1 {
		t.Fatalf("run record %s: %v", b, err)
	}
	if err := syscall.Kill(rec.Shim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the shim to die", func() bool { return !alive(rec.Shim) })
}

func TestProcess_kill(t *testing.T) {
	p, child := startWithChild(t, newRunner(t, time.Minute), `trap '' TERM; sleep 60 & echo $! > child.tmp; mv child.tmp child; wait`)
	p.Kill()
	if ex := p.Exit(); ex != (local.Exit{Code: 128 + int(syscall.SIGKILL), Signaled: true}) {
		t.Errorf("exit = %+v, want SIGKILL", ex)
	}
	eventually(t, "the child to be killed", func() bool { return !alive(child) })
}

// A pod stopped with SIGSTOP (a time-slicing plan) still ends on SIGTERM
// within its grace period rather than waiting for SIGKILL.
func TestProcess_stopWhileStopped(t *testing.T) {
	p, err := newRunner(t, time.Minute).Start(local.Spec{ID: "p", Command: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.Stop(ctx)
	if ex := p.Exit(); ex.Code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit = %+v, want SIGTERM's (not SIGKILL after the grace)", ex)
	}
}

// The pod's environment is only PATH, HOME, TMPDIR, the workload's and
// Runway's variables: nothing of the agent's (its etcd address, tokens).
func TestRunner_environmentIsThePods(t *testing.T) {
	t.Setenv("RUNWAY_TOKEN", "secret-token")
	t.Setenv("AGENT_ONLY", "x")
	r := newRunner(t, time.Second)
	p, err := r.Start(local.Spec{ID: "p", Command: []string{"sh", "-c", "env | sort > env.txt"}, Env: []string{"EXTRA=y"}, Project: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	b, err := os.ReadFile(filepath.Join(p.Dir(), "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		name, _, _ := strings.Cut(line, "=")
		if name != "PWD" && name != "SHLVL" && name != "_" { // the shell's own
			names = append(names, name)
		}
	}
	want := []string{"CUDA_VISIBLE_DEVICES", "EXTRA", "HOME", "PATH", "RUNWAY_GPU_FRACTION_MILLI", "RUNWAY_GPU_MEMORY_LIMIT_BYTES",
		"RUNWAY_POD_INDEX", "RUNWAY_PROJECT", "RUNWAY_WORKLOAD", "TMPDIR"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("pod environment = %v, want exactly %v", names, want)
	}
	if strings.HasPrefix(p.Dir(), r.RecordDir("p")) || strings.HasPrefix(r.RecordDir("p"), p.Dir()) {
		t.Errorf("working directory %s and record directory %s overlap", p.Dir(), r.RecordDir("p"))
	}
}

// As root, pods run as an unprivileged uid of their own, cannot read the
// runner's data directory nor another pod's directory, and the finished
// pod's directory goes back to root.
func TestRunner_podsRunAsTheirOwnUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): it checks the credentials pods get")
	}
	r := newRunner(t, time.Second)
	other, err := r.Start(local.Spec{ID: "other", Command: []string{"sh", "-c", "echo private > secret; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Stop(context.Background()) })
	eventually(t, "the other pod's file", func() bool { _, err := os.Stat(filepath.Join(other.Dir(), "secret")); return err == nil })
	p, err := r.Start(local.Spec{ID: "p", Command: []string{"sh", "-c",
		`id -u > uid; cat "$OTHER/secret" > stolen 2>&1; ls "$DATA" > listed 2>&1; cat /proc/1/environ > env1 2>&1; true`},
		Env: []string{"OTHER=" + other.Dir(), "DATA=" + r.RecordDir("other")}})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(p.Dir(), name))
		return strings.TrimSpace(string(b))
	}
	uid, _ := strconv.Atoi(read("uid"))
	if uid < int(local.DefaultUIDs.First) || uid > int(local.DefaultUIDs.Last) {
		t.Errorf("pod ran as uid %d, want one of %d-%d", uid, local.DefaultUIDs.First, local.DefaultUIDs.Last)
	}
	for _, f := range []string{"stolen", "listed"} {
		if got := read(f); !strings.Contains(got, "Permission denied") {
			t.Errorf("%s: %q, want Permission denied", f, got)
		}
	}
	// Its /proc shows only its own uid's processes (hidepid=invisible).
	if got := read("env1"); !strings.Contains(got, "No such file or directory") {
		t.Errorf("env1: %q, want No such file or directory (pid 1 not in the pod's /proc)", got)
	}
	st, err := os.Stat(p.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 0 || st.Mode().Perm() != 0o700 {
		t.Errorf("finished pod's directory: uid %d mode %v, want root's 0700", sys.Uid, st.Mode().Perm())
	}
}

// As root, a pod sees neither the paths the runner hides (a file reads
// empty, a directory is an unreadable empty tmpfs) nor other pods' or the
// agent's processes, and cannot unmount what covers them.
func TestRunner_podsMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): it checks the pods' mount namespace")
	}
	secrets := t.TempDir()
	key := filepath.Join(secrets, "tls.key")
	if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Both readable to anyone but for the namespace.
	looseDir := t.TempDir()
	loose := filepath.Join(looseDir, "token")
	if err := os.WriteFile(loose, []byte("admin-token"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{secrets, looseDir, filepath.Dir(looseDir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second, UIDs: local.DefaultUIDs, Hide: []string{secrets, loose}})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Describe(); !strings.Contains(d, "a private /proc") || !strings.Contains(d, "hiding the agent's credentials") {
		t.Errorf("Describe = %q, want it to say the pods' mount namespace and private /proc", d)
	}
	other, err := r.Start(local.Spec{ID: "other", Command: []string{"sh", "-c", "exec sleep 60 other-tenant-marker"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Stop(context.Background()) })
	p, err := r.Start(local.Spec{ID: "p", Command: []string{"sh", "-c", `cat "$KEY" > key 2>&1; cat "$TOKEN" > token 2>&1; ` +
		`cat /proc/*/cmdline > cmdlines 2>/dev/null; ls /proc/` + strconv.Itoa(other.Pid()) + ` > otherpid 2>&1; ` +
		`umount "$TOKEN" > umount 2>&1; cat "$TOKEN" >> umount 2>&1; grep NoNewPrivs /proc/self/status > nnp; ` +
		`ls -l /proc/$$/fd/ > fds 2>&1; true`},
		Env: []string{"KEY=" + key, "TOKEN=" + loose}})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(p.Dir(), name))
		return string(b)
	}
	if got := read("key"); !strings.Contains(got, "Permission denied") {
		t.Errorf("reading a key in a hidden directory: %q, want Permission denied (an empty mode-000 tmpfs)", got)
	}
	if got := read("token"); got != "" {
		t.Errorf("reading a hidden file: %q, want nothing (/dev/null over it)", got)
	}
	if got := read("cmdlines"); strings.Contains(got, "other-tenant-marker") || !strings.Contains(got, "cat") {
		t.Errorf("the pod's /proc/*/cmdline: %q, want its own processes only", got)
	}
	if got := read("cmdlines"); strings.Contains(got, "runway-pod-shim") {
		t.Errorf("the pod's /proc/*/cmdline: %q, shows its shim (root's: hidepid hides it)", got)
	}
	if got := read("fds"); strings.Contains(got, "socket:") || strings.Contains(got, "pipe:") || strings.Contains(got, "cgroup") || !strings.Contains(got, "output.log") {
		t.Errorf("the pod's open files:\n%s\nwant its log and none of its shim's (the control socket, the cgroup's directory, what the runner inherited)", got)
	}
	if got := read("otherpid"); !strings.Contains(got, "No such file or directory") {
		t.Errorf("the other pod's /proc entry: %q, want No such file or directory", got)
	}
	if got := read("umount"); strings.Contains(got, "admin-token") {
		t.Errorf("after umount: %q: the pod uncovered a hidden file", got)
	}
	if got := read("nnp"); !strings.Contains(got, "NoNewPrivs:\t1") {
		t.Errorf("the pod's status: %q, want NoNewPrivs 1 (no setuid program gains it privileges)", got)
	}
	// The shim makes the namespace around the command only: it still
	// writes the records in the (hidden) data directory.
	for _, name := range []string{local.RunName, local.ExitName} {
		if _, err := os.Stat(filepath.Join(r.RecordDir("p"), name)); err != nil {
			t.Errorf("the shim's %s record: %v", name, err)
		}
	}
	if b, err := os.ReadFile(loose); err != nil || string(b) != "admin-token" {
		t.Errorf("the runner's own view of the hidden file: %q, %v (its namespace must be untouched)", b, err)
	}
}

// A process that double-forks into a session of its own dies with its
// pod, on Stop and when the pod's first process exits.
func TestProcess_StopKillsEscapedProcesses(t *testing.T) {
	for _, mode := range []string{"", "none"} {
		r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second, Cgroup: mode, UIDs: local.DefaultUIDs})
		if err != nil {
			t.Fatal(err)
		}
		if mode == "" && !strings.HasPrefix(r.Tracking(), "cgroup") {
			t.Fatalf("no writable cgroup v2 hierarchy here (tracking %q)", r.Tracking())
		}
		// Session mode sees the escapee only while its parent lives: the
		// intermediate shell waits here.
		script := `(setsid sh -c 'sleep 300 & echo $! > child.tmp; mv child.tmp child; wait' &); exec sleep 300`
		if mode == "none" {
			script = `setsid sh -c 'sleep 300 & echo $! > child.tmp; mv child.tmp child; wait' & sleep 300`
		}
		p, child := startWithChild(t, r, script)
		if mode == "none" {
			time.Sleep(100 * time.Millisecond)
			r.CPU(p) // one walk: the session's processes are seen
		}
		p.Stop(context.Background())
		eventually(t, r.Tracking()+": the escaped child to die", func() bool { return !alive(child) })

		p, child = startWithChild(t, r, `(setsid sh -c 'sleep 300 & echo $! > child.tmp; mv child.tmp child; wait' &); sleep 0.5`)
		if mode == "" {
			waitDone(t, p)
			if alive(child) {
				t.Errorf("%s: the escaped child outlived its pod", r.Tracking())
			}
		}
		r.Close()
	}
}

// CPU grows while a pod computes, read after read (in cgroup mode through
// one cpu.stat descriptor kept open), and counts its escaped processes.
func TestRunner_CPUGrows(t *testing.T) {
	for _, mode := range []string{"", "none"} {
		r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second, Cgroup: mode, UIDs: local.DefaultUIDs})
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.Start(local.Spec{ID: "busy", Command: []string{"sh", "-c", "while :; do :; done"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill) // a failed wait must not leave it spinning
		var last time.Duration
		for i := range 3 {
			eventually(t, fmt.Sprintf("%s: CPU read %d above %v", r.Tracking(), i, last), func() bool {
				return r.CPU(p)[0] > last
			})
			last = r.CPU(p)[0]
			if one := p.CPU(); one < last {
				t.Errorf("%s: Process.CPU %v below Runner.CPU's %v", r.Tracking(), one, last)
			}
		}
		p.Kill()
		if got := r.CPU(p)[0]; mode == "" && got != 0 {
			t.Errorf("%s: CPU of an ended pod whose cgroup is gone = %v, want 0", r.Tracking(), got)
		}
		r.Close()
	}
}

// A pod that burns CPU and holds 64 MiB shows both in Usage, followed by
// cgroup and by session; a sleeping one uses next to no CPU.
func TestRunner_Usage(t *testing.T) {
	for _, mode := range []string{"", "none"} {
		r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second, Cgroup: mode, UIDs: local.DefaultUIDs})
		if err != nil {
			t.Fatal(err)
		}
		busy, err := r.Start(local.Spec{ID: "busy", Command: []string{"awk", `BEGIN { s = sprintf("%1000s", ""); while (length(s) < 67108864) s = s s; while (1) n++ }`}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(busy.Kill) // a failed wait must not leave it spinning
		idle, err := r.Start(local.Spec{ID: "idle", Command: []string{"sleep", "300"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(idle.Kill)
		var u []local.Usage
		eventually(t, r.Tracking()+": 200 ms of CPU and 64 MiB", func() bool {
			u = r.Usage(busy, idle)
			return u[0].CPU >= 200*time.Millisecond && u[0].MemoryBytes >= 64<<20
		})
		if u[1].CPU > 100*time.Millisecond || u[1].MemoryBytes <= 0 || u[1].MemoryBytes >= 64<<20 {
			t.Errorf("%s: the sleeping pod: %+v", r.Tracking(), u[1])
		}
		busy.Stop(context.Background())
		idle.Stop(context.Background())
		r.Close()
	}
}
