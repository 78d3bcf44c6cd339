//go:build linux

package hostile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/runwayhq/runway/cmd/runway/server"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/scheduler"
)

// ctrSecret is what the tests' host listeners answer: a pod that prints
// it reached them.
const ctrSecret = "node-secret-7f3a"

// ctrNode is a real podman engine and a container runner on it, as an
// agent holds.
type ctrNode struct {
	engine *podmantest.Engine
	runner *container.Runner
	cli    *client.Client
	guard  string // the runner's nftables table (inet family)
}

func ctrStart(t *testing.T) *ctrNode {
	t.Helper()
	e := podmantest.Start(t)
	dir := t.TempDir()
	r, err := container.New(context.Background(), container.Config{Host: e.Host, DataDir: dir, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return &ctrNode{engine: e, runner: r, cli: cli, guard: container.GuardTable(runner.Name(dir))}
}

// run starts pod id of project with a shell script.
func (n *ctrNode) run(t *testing.T, project, id, script string) runner.Pod {
	t.Helper()
	return n.start(t, runner.Spec{ID: id, Project: project}, script)
}

// start starts pod spec.ID of spec.Project with a shell script, as the
// agent would with spec's other fields (RunAsRoot, AddCapabilities).
func (n *ctrNode) start(t *testing.T, spec runner.Spec, script string) runner.Pod {
	t.Helper()
	spec.Image, spec.Command = podmantest.Image, []string{"sh", "-c", script}
	spec.Workload, spec.WorkloadUID = "projects/"+spec.Project+"/workloads/w-"+spec.ID, spec.ID
	p, err := n.runner.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// output waits for the pod's end and returns its log.
func ctrOutput(t *testing.T, p runner.Pod) string {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the pod did not end in 2 minutes")
	}
	return ctrLog(t, p)
}

func ctrLog(t *testing.T, p runner.Pod) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// endpoint is the pod's address and its network's gateway (the host's
// side of the bridge).
func (n *ctrNode) endpoint(t *testing.T, id string) (ip, gateway netip.Addr) {
	t.Helper()
	list, err := n.cli.ContainerList(t.Context(), client.ContainerListOptions{Filters: client.Filters{}.Add("label", container.LabelPodID+"="+id)})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the container of pod %s: %v (%d found)", id, err, len(list.Items))
	}
	c, err := n.cli.ContainerInspect(t.Context(), list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Container.NetworkSettings.Networks) != 1 {
		t.Fatalf("pod %s is on networks %v, want its project's alone", id, c.Container.NetworkSettings.Networks)
	}
	for _, ep := range c.Container.NetworkSettings.Networks {
		return ep.IPAddress, ep.Gateway
	}
	panic("unreachable")
}

// ctrHostAddr is a non-loopback IPv4 address of the node that is not on a
// pods' bridge (its LAN address).
func ctrHostAddr(t *testing.T) netip.Addr {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || i.Flags&net.FlagUp == 0 || strings.HasPrefix(i.Name, "rw") ||
			strings.HasPrefix(i.Name, "podman") || strings.HasPrefix(i.Name, "veth") || strings.HasPrefix(i.Name, "docker") {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
				return p.Addr()
			}
		}
	}
	t.Fatal("the node has no non-loopback IPv4 address")
	return netip.Addr{}
}

// ctrListen serves ctrSecret on addr (host:port) until the test ends.
func ctrListen(t *testing.T, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, ctrSecret+"\n")
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// ctrReach reports whether the host itself reaches addr and reads what it
// says.
func ctrReach(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// ctrTries is a pod script that connects to each address (host port) and
// prints what answers, then "tried ADDR rc=N" for each.
func ctrTries(addrs ...string) string {
	var b strings.Builder
	for _, a := range addrs {
		h, p, _ := net.SplitHostPort(a)
		b.WriteString("nc -w 3 " + h + " " + p + " </dev/null; echo tried " + a + " rc=$?; ")
	}
	return b.String()
}

// ctrDev is `runway dev` in this process with its agents on the engine,
// and the bootstrap administrator's client.
type ctrDev struct {
	rw          *sdk.Client
	addr        string // the API's address
	metricsAddr string
}

func ctrStartDev(t *testing.T, engineHost string) *ctrDev {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	metrics := make(chan string, 1)
	done := make(chan error, 1)
	cfg := server.DevConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Nodes: 1, GPUsPerNode: 1, Engine: engineHost,
		Logger: slog.New(slog.DiscardHandler), StopGrace: time.Second,
		Metrics:     server.MetricsConfig{Listen: "127.0.0.1:0", Ready: func(a string) { metrics <- a }},
		EtcdOptions: []etcdtest.Option{etcdtest.WithTestSpeedups(), etcdtest.WithLogger(zap.NewNop())},
		Scheduler:   scheduler.Config{Interval: 100 * time.Millisecond, Debounce: 10 * time.Millisecond}}
	go func() { done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} }) }()
	var at [2]string
	select {
	case at = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("RunDev: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("RunDev not ready after 60 s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("RunDev did not stop within 30 s of its context's end")
		}
	})
	c, err := sdk.Dial(t.Context(), sdk.Config{Server: at[0], Token: at[1]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	d := &ctrDev{rw: c, addr: strings.TrimPrefix(strings.TrimPrefix(at[0], "http://"), "https://")}
	select {
	case d.metricsAddr = <-metrics:
	case <-time.After(10 * time.Second):
		t.Fatal("the operations listener did not start")
	}
	return d
}

// submit submits a CPU training of project that runs script.
func (d *ctrDev) submit(t *testing.T, project, id, script string, sec *workloadv1.ContainerSecurity) error {
	t.Helper()
	_, err := d.rw.SubmitWorkload(t.Context(), project, id, workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: podmantest.Image, Command: []string{"sh", "-c", script}, Security: sec})
	return err
}

// output waits for the workload to end and returns its pod's output.
func (d *ctrDev) output(t *testing.T, project, id string) string {
	t.Helper()
	name := sdk.ProjectName(project) + "/workloads/" + id
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		w, err := d.rw.WorkloadService.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if ph := w.GetStatus().GetPhase(); ph == workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED || ph == workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not end in 2 minutes: %v", name, w.GetStatus())
		}
	}
	st, err := d.rw.WorkloadService.ReadWorkloadLogs(t.Context(), &workloadv1.ReadWorkloadLogsRequest{Name: name, TailLines: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return string(out)
		}
		if err != nil {
			t.Fatalf("logs of %s: %v", name, err)
		}
		out = append(out, r.GetData()...)
	}
}

// ctrExec runs a command on the node, failing the test when it fails.
func ctrExec(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := ctrRun(name, args...); err != nil {
		t.Fatal(err)
	}
}

func ctrRun(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v: %s", name, args, err, out)
	}
	return nil
}

// ctrBridge is the node's interface towards a pod's address: its
// network's bridge.
func ctrBridge(t *testing.T, ip netip.Addr) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "route", "get", ip.String()).CombinedOutput()
	f := strings.Fields(string(out))
	if i := slices.Index(f, "dev"); err == nil && i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	t.Fatalf("ip route get %s: %v: %s", ip, err, out)
	return ""
}

// ctrFrom connects to addr from the pod's network namespace (a host
// process in it: the pod's interface, routes and bridge) and returns what
// answered and nc's exit status.
func ctrFrom(t *testing.T, p runner.Pod, addr string) string {
	t.Helper()
	h, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(p.Pid()), "-n", "--", "/bin/busybox", "nc", "-w", "3", h, port).CombinedOutput()
	return fmt.Sprintf("%q (%v)", out, err)
}

// crossBridgeDrops is how many packets the runner's guard has dropped on
// its way across pods' bridges (its CrossBridgeRule rules' counters).
func (n *ctrNode) crossBridgeDrops(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "inet", n.guard).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table inet %s: %v: %s", n.guard, err, out)
	}
	total, rules := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, `comment "`+container.CrossBridgeRule+`"`) {
			continue
		}
		rules++
		f := strings.Fields(line)
		if i := slices.Index(f, "packets"); i >= 0 && i+1 < len(f) {
			k, _ := strconv.Atoi(f[i+1])
			total += k
		}
	}
	if rules == 0 {
		t.Fatalf("the guard has no %q rule:\n%s", container.CrossBridgeRule, out)
	}
	return total
}

// dropGuard deletes the runner's nftables table and returns what puts it
// back as it was (also run at cleanup).
func (n *ctrNode) dropGuard(t *testing.T) (restore func()) {
	t.Helper()
	saved, err := exec.Command("nft", "list", "table", "inet", n.guard).Output()
	if err != nil {
		t.Fatal(err)
	}
	ctrExec(t, "nft", "delete", "table", "inet", n.guard)
	return ctrOnce(t, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(string(saved))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("restore the guard: %v: %s", err, out)
		}
		return nil
	})
}

// ctrDropIsolation deletes netavark's isolation rules (iptables chains
// NETAVARK_ISOLATION_1 and _2) of the bridges, which only this test's
// networks have, and returns what adds them again (also run at cleanup).
func ctrDropIsolation(t *testing.T, bridges []string) (restore func()) {
	t.Helper()
	var rules [][]string
	for _, br := range bridges {
		rules = append(rules, []string{"NETAVARK_ISOLATION_1", "-i", br, "!", "-o", br, "-j", "NETAVARK_ISOLATION_2"},
			[]string{"NETAVARK_ISOLATION_2", "-o", br, "-j", "DROP"})
	}
	var gone [][]string
	restore = ctrOnce(t, func() error {
		for _, r := range gone {
			if err := ctrRun("iptables", append([]string{"-A"}, r...)...); err != nil {
				return err
			}
		}
		return nil
	})
	for _, r := range rules {
		// Every copy: netavark may have appended one per container.
		k := 0
		for ; ctrRun("iptables", append([]string{"-D"}, r...)...) == nil; k++ {
			gone = append(gone, r)
		}
		if k == 0 {
			restore()
			t.Fatalf("podman's isolation rule %v is not there (is the network isolated?)", r)
		}
	}
	return restore
}

// ctrOnce is undo, run once: when the test calls it, else at cleanup.
func ctrOnce(t *testing.T, undo func() error) func() {
	var once sync.Once
	run := func() {
		once.Do(func() {
			if err := undo(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(run)
	return run
}

// ctrFirewall is the node's ruleset, for a failure's message.
func ctrFirewall() string {
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	return fmt.Sprintf("nft list ruleset (%v):\n%s", err, out)
}
