//go:build linux

package hostile

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/sdk"
)

// A pod of team-b listens on its network; a pod of team-a that knows its
// address cannot connect, while another pod of team-b can (the listener
// is there: the refusal is the network's). Two layers keep them apart,
// and each is shown to hold alone and to be what refused: the runner's
// nftables guard (its cross-bridge rules count the attempt) and podman's
// isolate option on each project's network (netavark's
// NETAVARK_ISOLATION rules). With both taken away for these two bridges
// the same attempt, from the same pod's network namespace, reaches the
// victim: the refusals are not the test's own doing.
func TestHostileContainer_otherProjectsContainerUnreachable(t *testing.T) {
	n := ctrStart(t)
	victim := n.run(t, "team-b", "victim.0", "while :; do nc -l -p 8080 -e echo "+ctrSecret+"; done")
	ip, _ := n.endpoint(t, "victim.0")
	at := net.JoinHostPort(ip.String(), "8080")
	mate := ctrOutput(t, n.run(t, "team-b", "mate.0", "sleep 1; "+ctrTries(at)))
	if !strings.Contains(mate, ctrSecret) {
		t.Fatalf("a pod of the victim's own project did not reach it at %s (the test proves nothing):\n%s", at, mate)
	}
	prober := n.run(t, "team-a", "prober.0", "sleep 600")
	self, _ := n.endpoint(t, "prober.0")
	bridges := []string{ctrBridge(t, self), ctrBridge(t, ip)}

	dropped := n.crossBridgeDrops(t)
	attacker := ctrOutput(t, n.run(t, "team-a", "attacker.0", ctrTries(at)))
	if strings.Contains(attacker, ctrSecret) || !strings.Contains(attacker, "tried "+at+" rc=1") {
		t.Errorf("team-a's pod reached team-b's container at %s:\n%s", at, attacker)
	}
	if got := n.crossBridgeDrops(t); got <= dropped {
		t.Errorf("the guard's cross-bridge rules dropped nothing (%d packets before, %d after): something else refused", dropped, got)
	}

	// The guard taken away: podman's isolation alone still refuses.
	restoreGuard := n.dropGuard(t)
	if out := ctrFrom(t, prober, at); strings.Contains(out, ctrSecret) {
		t.Errorf("without the guard, podman's isolation let team-a reach team-b at %s: %s", at, out)
	}
	// Podman's isolation of both bridges taken away too: the attack works.
	restoreIsolation := ctrDropIsolation(t, bridges)
	if out := ctrFrom(t, prober, at); !strings.Contains(out, ctrSecret) {
		t.Fatalf("with neither layer team-a still does not reach %s (the test proves nothing): %s\n%s", at, out, ctrFirewall())
	}
	// The guard alone refuses again, and says so.
	restoreGuard()
	dropped = n.crossBridgeDrops(t)
	if out := ctrFrom(t, prober, at); strings.Contains(out, ctrSecret) {
		t.Errorf("the guard alone let team-a reach team-b at %s: %s", at, out)
	}
	if got := n.crossBridgeDrops(t); got <= dropped {
		t.Errorf("the guard alone refused, yet its cross-bridge rules dropped nothing (%d, %d)", dropped, got)
	}
	restoreIsolation()
	select {
	case <-victim.Done():
		t.Errorf("the victim's listener ended: %s", ctrLog(t, victim))
	default:
	}
}

// The node's own services: listeners on the node's LAN address and on the
// pods' gateway, at the API's and the operations (metrics) listener's
// ports of a running Runway, and the cloud metadata address. The node
// reaches each of them; a pod reaches none.
func TestHostileContainer_nodeServicesAndMetadataUnreachable(t *testing.T) {
	d := ctrStartDev(t, "")
	n := ctrStart(t)
	// The project's bridge (and its gateway address) is there while a pod
	// of the project runs.
	n.run(t, "team-a", "probe.0", "sleep 600")
	_, gw := n.endpoint(t, "probe.0")
	lan := ctrHostAddr(t)
	var targets []string
	for _, port := range []string{ctrPort(t, d.addr), ctrPort(t, d.metricsAddr)} {
		for _, host := range []netip.Addr{lan, gw} {
			targets = append(targets, ctrListen(t, net.JoinHostPort(host.String(), port)))
		}
	}
	for _, a := range targets {
		if got, err := ctrReach(a); err != nil || got != ctrSecret {
			t.Fatalf("the node itself does not reach %s (%q, %v): the test proves nothing", a, got, err)
		}
	}
	meta := ctrMetadata(t)
	out := ctrOutput(t, n.run(t, "team-a", "spy.0", ctrTries(append(targets, meta)...)))
	if strings.Contains(out, ctrSecret) {
		t.Errorf("a pod reached a node service:\n%s", out)
	}
	for _, a := range append(targets, meta) {
		if !strings.Contains(out, "tried "+a+" rc=1") {
			t.Errorf("a pod connected to %s (or never tried):\n%s", a, out)
		}
	}
}

// ctrMetadata is the cloud metadata address's HTTP port, which the node
// must reach (else the pod's failure would prove nothing): here a service
// answers there; where none does, a listener on a dummy interface of the
// node stands in for it.
func ctrMetadata(t *testing.T) string {
	t.Helper()
	const meta = "169.254.169.254:80"
	if c, err := net.DialTimeout("tcp", meta, 2*time.Second); err == nil {
		_ = c.Close()
		return meta
	}
	link := fmt.Sprintf("rwmeta%d", time.Now().UnixNano()%100000)
	ctrExec(t, "ip", "link", "add", link, "type", "dummy")
	t.Cleanup(func() { _ = ctrRun("ip", "link", "del", link) })
	ctrExec(t, "ip", "addr", "add", "169.254.169.254/32", "dev", link)
	ctrExec(t, "ip", "link", "set", link, "up")
	return ctrListen(t, meta)
}

func ctrPort(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Without a policy a submission that asks for root or a capability is
// refused, naming the field; the pod it runs instead has the project's
// uid, no capability, the engine's seccomp filter and no way to give a
// file to root. With a project's policy that lists them, the same
// submission runs as root with that capability and no other; the policy's
// change is in the audit log; another project still may not.
func TestHostileContainer_rootAndCapabilitiesOnlyByPolicy(t *testing.T) {
	n := ctrStart(t)
	d := ctrStartDev(t, n.engine.Host)
	for _, p := range []string{"team-a", "team-b"} {
		if _, err := d.rw.CreateProject(t.Context(), p, &quotav1.Project{}); err != nil {
			t.Fatal(err)
		}
	}
	const script = "id -u; id -g; grep -E '^(CapEff|Seccomp|NoNewPrivs):' /proc/self/status; chown 0:0 . && echo CHOWNED"
	root := &workloadv1.ContainerSecurity{RunAsRoot: true}
	raw := &workloadv1.ContainerSecurity{AddCapabilities: []string{"NET_RAW"}}
	for field, sec := range map[string]*workloadv1.ContainerSecurity{"workload.spec.security.run_as_root": root, "workload.spec.security.add_capabilities": raw} {
		err := d.submit(t, "team-a", "asks-"+strconv.Itoa(len(field)), script, sec)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "no policy") {
			t.Errorf("%s without a policy: %v, want INVALID_ARGUMENT naming it", field, err)
		}
	}
	if err := d.submit(t, "team-a", "plain", script, nil); err != nil {
		t.Fatal(err)
	}
	uid := strconv.Itoa(int(runner.ProjectUID("team-a")))
	out := d.output(t, "team-a", "plain")
	for _, want := range []string{uid + "\n" + uid + "\n", "CapEff:\t0000000000000000", "Seccomp:\t2", "NoNewPrivs:\t1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the default pod's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "CHOWNED") || strings.HasPrefix(out, "0\n") {
		t.Errorf("the default pod acted as root:\n%s", out)
	}

	_, err := d.rw.SetPolicy(t.Context(), sdk.Scope{Project: "team-a"}, "training", &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{
		"security.runAsRoot":       {Options: []string{"true"}},
		"security.addCapabilities": {Options: []string{"NET_RAW", "CHOWN"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	allowed := &workloadv1.ContainerSecurity{RunAsRoot: true, AddCapabilities: []string{"CHOWN"}}
	if err := d.submit(t, "team-a", "allowed", script, allowed); err != nil {
		t.Fatalf("root and CHOWN under team-a's policy: %v", err)
	}
	out = d.output(t, "team-a", "allowed")
	for _, want := range []string{"0\n0\n", "CapEff:\t0000000000000001", "Seccomp:\t2", "CHOWNED"} {
		if !strings.Contains(out, want) {
			t.Errorf("the allowed pod's output lacks %q:\n%s", want, out)
		}
	}
	if err := d.submit(t, "team-a", "sysadmin", script, &workloadv1.ContainerSecurity{AddCapabilities: []string{"SYS_ADMIN"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("SYS_ADMIN, which team-a's policy does not list: %v, want INVALID_ARGUMENT", err)
	}
	if err := d.submit(t, "team-b", "root", script, root); status.Code(err) != codes.InvalidArgument {
		t.Errorf("root in team-b, under no policy: %v, want INVALID_ARGUMENT", err)
	}
	ev, err := d.rw.IdentityService.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{
		Filter: `method = "/runway.workload.v1.GovernanceService/UpdatePolicy"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.GetAuditEvents()) != 1 || ev.GetAuditEvents()[0].GetPrincipal() != "users/admin" ||
		ev.GetAuditEvents()[0].GetResource() != "projects/team-a/policies/training" || ev.GetAuditEvents()[0].GetStatusCode() != 0 {
		t.Errorf("the relaxing policy's audit events: %v, want one by users/admin on projects/team-a/policies/training", ev.GetAuditEvents())
	}
}

// Each project's containers are in a user namespace of its own: root in
// one (as a policy allows, with CHOWN and DAC_OVERRIDE) is an unprivileged
// uid of the host, its project's range, as the host sees its process and
// the files it makes; a root-owned file put in its own work directory
// stays out of its reach. A default pod runs as its project's uid, which
// is the same uid on the host (its work directory's owner), in a
// namespace whose uid 0 is its project's base uid too.
func TestHostileContainer_rootIsUnprivilegedOnTheHost(t *testing.T) {
	n := ctrStart(t)
	if d := n.runner.Describe(); !strings.Contains(d, "in a user namespace of its project's") {
		t.Errorf("the agent's start line does not say pods get user namespaces: %s", d)
	}
	base := container.ProjectHostBase("team-a")
	if base < container.ProjectHostRanges.First || base == 0 {
		t.Fatalf("team-a's host base uid %d", base)
	}
	// Each pod waits for the test's go-ahead (a file "go"), so that the
	// host reads its process's uids while it runs and the root-owned
	// secret is in place before it tries.
	const script = "id -u; cat /proc/self/uid_map; while [ ! -e go ]; do sleep 0.1; done; " +
		"touch mine && chown 0:0 mine && echo CHOWNED; cat secret || echo DENIED"
	root := n.start(t, runner.Spec{ID: "root.0", Project: "team-a", RunAsRoot: true, AddCapabilities: []string{"CHOWN", "DAC_OVERRIDE"}}, script)
	plain := n.start(t, runner.Spec{ID: "plain.0", Project: "team-a"}, script)
	uid := runner.ProjectUID("team-a")
	for p, want := range map[runner.Pod]uint32{root: base, plain: uid} {
		if got := ctrHostUIDs(t, p.Pid()); got != [2]uint32{want, want} {
			t.Errorf("the host sees pod %s's process as uid and gid %v, want %d", filepath.Base(p.Dir()), got, want)
		}
		for _, f := range []string{"secret", "go"} {
			if err := os.WriteFile(filepath.Join(p.Dir(), f), []byte(ctrSecret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	uidMap := fmt.Sprintf("0 %d 65536", base)
	out := ctrOutput(t, root)
	if !strings.HasPrefix(out, "0\n") || !strings.Contains(out, "CHOWNED") || strings.Contains(out, ctrSecret) || !strings.Contains(out, "DENIED") {
		t.Errorf("the root pod's output (want uid 0, CHOWNED, the root-owned secret denied):\n%s", out)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), uidMap) {
		t.Errorf("the root pod's uid_map lacks %q:\n%s", uidMap, out)
	}
	if st, err := os.Stat(filepath.Join(root.Dir(), "mine")); err != nil || st.Sys().(*syscall.Stat_t).Uid != base {
		t.Errorf("the file the root pod gave to its uid 0 on the host: %v, %v; want owned by %d", st, err, base)
	}
	out = ctrOutput(t, plain)
	if !strings.HasPrefix(out, strconv.Itoa(int(uid))+"\n") || strings.Contains(out, "CHOWNED") || !strings.Contains(out, "DENIED") ||
		!strings.Contains(strings.Join(strings.Fields(out), " "), uidMap) {
		t.Errorf("the default pod's output (want its project's uid, no chown, the secret denied, uid 0 of the namespace at %d):\n%s", base, out)
	}
}

// ctrHostUIDs is the effective uid and gid the host sees process pid as.
func ctrHostUIDs(t *testing.T, pid int) [2]uint32 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var ids [2]uint32
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, key := range []string{"Uid:", "Gid:"} {
			if len(f) > 2 && f[0] == key {
				n, _ := strconv.ParseUint(f[2], 10, 32)
				ids[i] = uint32(n)
			}
		}
	}
	return ids
}
