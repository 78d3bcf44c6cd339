package container

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner"
)

// Pods' networks. Each project gets a bridge of its own on the engine (per
// runner), so that no pod reaches another project's containers; the
// bridge's interface is named by the runner (bridgePrefix), so that the
// runner's nftables table (guard) can keep its pods from the node itself:
// nothing coming in from a pods' bridge reaches a host address (the agent's
// and the API's ports, the metrics, the engine) but DNS on its gateway,
// nothing is forwarded from it to another pods' bridge, nor to the
// link-local range (169.254.0.0/16: the cloud metadata address) or the
// metadata's IPv6 address, and no connection into it is opened from
// elsewhere. Traffic out to other hosts (the internet) is routed as the
// engine routes it. On podman, netavark's isolation of each network keeps
// projects apart too, below the guard (which drops first: a higher
// priority); each holds alone (the hostile suite takes the other away).
const (
	bridgePrefix = "rw"
	// NetworkNone runs pods with no network at all (Config.Network).
	NetworkNone = "none"
	// nft is the nftables tool the guard is written with.
	nft = "nft"
)

// A network's key is its project's id, or, for the network of a
// distributed training's pods, "{project}.{workload uid}" (a dot is in no
// project id): those pods reach each other by name (DNS aliases), and the
// guard keeps every other pod, of their project too, off their bridge.

// networkKey is the key of the network spec's pod joins.
func networkKey(spec runner.Spec) string {
	if spec.Hostname != "" {
		return spec.Project + "." + spec.WorkloadUID
	}
	return spec.Project
}

// networkName is the engine's name of the network of key: the runner's, so
// that runners on one engine (tests, two agents) never share one.
func (r *Runner) networkName(key string) string { return "runway-" + r.name + "-" + key }

// bridgeName is the host interface of key's network: at most 15 bytes
// (IFNAMSIZ), unique per runner and key.
func (r *Runner) bridgeName(key string) string {
	sum := sha256.Sum256([]byte(r.name + "/" + key))
	return bridgePrefix + hex.EncodeToString(sum[:6])
}

// CrossBridgeRule is the comment of the guard's counted rules that drop
// what one pods' bridge sends to another (another project's containers)
// and any connection opened into a pods' bridge from elsewhere.
const CrossBridgeRule = "across pods' bridges"

// GuardTable is the nftables table (inet family) of the runner named
// runner (pkg/runner.Name of its data directory).
func GuardTable(runner string) string { return "runway_" + runner }

func (r *Runner) guardTable() string { return GuardTable(r.name) }

// network returns the network mode of spec's pod, creating its network
// (and guarding its bridge) when it is not there yet.
func (r *Runner) network(ctx context.Context, spec runner.Spec) (string, error) {
	if r.cfg.Network == NetworkNone {
		return NetworkNone, nil
	}
	key := networkKey(spec)
	name := r.networkName(key)
	r.netMu.Lock()
	defer r.netMu.Unlock()
	if r.nets[key] {
		return name, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := r.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		opts := map[string]string{"com.docker.network.bridge.name": r.bridgeName(key)}
		if r.podman {
			// netavark's NETAVARK_ISOLATION rules: nothing between two
			// isolated networks, a second layer under the guard (podman's
			// Docker API isolates its networks by default; said anyway).
			opts["isolate"] = "true"
		}
		labels := map[string]string{LabelRunner: r.name, LabelProject: spec.Project}
		if key != spec.Project {
			labels[LabelWorkloadUID] = spec.WorkloadUID
		}
		_, err = r.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Options: opts, Labels: labels})
		if cerrdefs.IsConflict(err) { // created meanwhile by another runner process
			err = nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("network %s: %w", key, err)
	}
	bridges := append(slices.Clone(r.bridges), r.bridgeName(key))
	if err := r.guard(bridges); err != nil {
		return "", err
	}
	r.nets[key], r.bridges = true, bridges
	return name, nil
}

// dropNetwork removes the network of a distributed training's pods once
// none of them is left on this engine (the engine refuses while one is
// attached: then a later removal of its last pod does it), and takes its
// bridge out of the guard.
func (r *Runner) dropNetwork(key string) {
	if r.cfg.Network == NetworkNone {
		return
	}
	r.netMu.Lock()
	defer r.netMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if _, err := r.cli.NetworkRemove(ctx, r.networkName(key), client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return
	}
	br := r.bridgeName(key)
	bridges := slices.DeleteFunc(slices.Clone(r.bridges), func(b string) bool { return b == br })
	if r.guard(bridges) == nil {
		delete(r.nets, key)
		r.bridges = bridges
	}
}

// loadNetworks reads the runner's networks from the engine (an earlier
// agent's) and writes the guard of their bridges: it stands before any pod
// is started or adopted.
func (r *Runner) loadNetworks(ctx context.Context) error {
	if r.cfg.Network == NetworkNone {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := r.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("label", LabelRunner+"="+r.name)})
	if err != nil {
		return fmt.Errorf("list the pods' networks: %w", err)
	}
	for _, n := range list.Items {
		key := n.Labels[LabelProject]
		if uid := n.Labels[LabelWorkloadUID]; uid != "" {
			key += "." + uid
		}
		if key != "" && n.Name == r.networkName(key) {
			r.nets[key] = true
			r.bridges = append(r.bridges, r.bridgeName(key))
		}
	}
	slices.Sort(r.bridges)
	return r.guard(r.bridges)
}

// guard replaces the runner's nftables table with the rules for bridges,
// in one transaction (no moment without them). Base chains at a priority
// before the filter's: a drop here is final whatever the engine's own
// rules (netavark, dockerd) accept later.
func (r *Runner) guard(bridges []string) error {
	t := r.guardTable()
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {}\ndelete table inet %s\n", t, t)
	if len(bridges) == 0 { // no pods' network yet: no table either
		return writeTable(t, b.String())
	}
	fmt.Fprintf(&b, "table inet %s {\n", t)
	b.WriteString("  chain input {\n    type filter hook input priority filter - 10; policy accept;\n")
	for _, br := range bridges {
		// DNS on the gateway (the engine's resolver), replies to what the
		// pod was asked; nothing else of the node.
		fmt.Fprintf(&b, "    iifname %q meta l4proto { tcp, udp } th dport 53 accept\n", br)
		fmt.Fprintf(&b, "    iifname %q ct state established,related accept\n", br)
		fmt.Fprintf(&b, "    iifname %q drop\n", br)
	}
	b.WriteString("  }\n  chain forward {\n    type filter hook forward priority filter - 10; policy accept;\n")
	for _, br := range bridges {
		fmt.Fprintf(&b, "    iifname %q ip daddr 169.254.0.0/16 drop\n", br)
		fmt.Fprintf(&b, "    iifname %q ip6 daddr { fe80::/10, fd00:ec2::254 } drop\n", br)
		// Counted, so that the hostile suite can tell this guard's drop
		// from the engine's own isolation (podman's isolate).
		fmt.Fprintf(&b, "    iifname %q oifname != %q oifname \"%s*\" counter drop comment %q\n", br, br, bridgePrefix, CrossBridgeRule)
		fmt.Fprintf(&b, "    iifname %q oifname { \"podman*\", \"docker*\", \"cni*\" } drop\n", br)
		// Nothing opens a connection into the bridge from elsewhere (another
		// engine's bridge, the LAN): replies to the pods' own still pass.
		fmt.Fprintf(&b, "    oifname %q iifname != %q ct state new counter drop comment %q\n", br, br, CrossBridgeRule)
	}
	b.WriteString("  }\n}\n")
	return writeTable(t, b.String())
}

// writeTable runs an nft script that writes table t.
func writeTable(t, script string) error {
	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("container runner: the pods' network guard (nft table inet %s) was not written: %v: %s", t, err, strings.TrimSpace(out.String()))
	}
	return nil
}
