package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner"
)

// DefaultStopGrace is Config.StopGrace when it is 0.
const DefaultStopGrace = 10 * time.Second

// PidsLimit bounds the processes of each container: a fork bomb stays in
// its pod.
const PidsLimit = 4096

// Labels every pod's container carries.
const (
	LabelRunner      = "io.runway.runner" // the runner's name: a hash of its data directory
	LabelPodID       = "io.runway.pod-id" // Spec.ID
	LabelProject     = "io.runway.project"
	LabelWorkload    = "io.runway.workload"
	LabelWorkloadUID = "io.runway.workload-uid"
	LabelPod         = "io.runway.pod"
	LabelRevision    = "io.runway.revision" // Spec.Revision
	LabelNetwork     = "io.runway.network"  // the key of the pod's network (networkKey)
)

// apiTimeout bounds each engine call but the long ones (wait, logs, stop,
// image pull).
const apiTimeout = 30 * time.Second

// Config is the runner's setup.
type Config struct {
	// Host is the engine's address (unix:///run/podman/podman.sock,
	// tcp://…); Find gives one. Required.
	Host string
	// DataDir is the runner's own: one record directory per pod (its log,
	// copied from the engine), never mounted into a pod (mode 0700).
	// Required.
	DataDir string
	// WorkDir holds the pods' working directories, each bind-mounted into
	// its pod's container at the same path; outside DataDir. Empty:
	// os.TempDir()/runway-containers/<hash of DataDir> (pkg/runner.MakeDirs).
	WorkDir string
	// Network is empty for a network per project (network.go), or
	// NetworkNone for pods without any network.
	Network string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL;
	// DefaultStopGrace when 0.
	StopGrace time.Duration
}

// Runner runs pods as containers. It is safe for concurrent use.
type Runner struct {
	cfg    Config
	cli    *client.Client
	name   string // LabelRunner's value
	engine string // the engine's name and version
	podman bool   // podman takes CDI names as devices, dockerd as device requests
	userns bool   // each project's pods in a user namespace of its own (userNS): podman 4 and later

	netMu   sync.Mutex
	nets    map[string]bool // the projects whose network is there and guarded
	bridges []string        // their bridges, in the guard
}

// New connects to the engine at cfg.Host.
func New(ctx context.Context, cfg Config) (*Runner, error) {
	if cfg.Host == "" || cfg.DataDir == "" {
		return nil, errors.New("container runner: Config.Host and Config.DataDir are required")
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Network != "" && cfg.Network != NetworkNone {
		return nil, fmt.Errorf("container runner: Config.Network %q: must be empty (a network per project) or %q", cfg.Network, NetworkNone)
	}
	if os.Geteuid() != 0 {
		// The guard of the pods' networks is an nftables table, and each
		// pod's work directory is given to the pod's uid.
		return nil, errors.New("container runner: the agent must run as root (with a rootful engine) to keep pods from the node's services and give each pod its own uid")
	}
	dirs, err := runner.MakeDirs(cfg.DataDir, cfg.WorkDir, "runway-containers")
	if err != nil {
		return nil, fmt.Errorf("container runner: %w", err)
	}
	cfg.DataDir, cfg.WorkDir = dirs.Data, dirs.Work
	name := dirs.Name
	cli, err := client.New(client.WithHost(cfg.Host))
	if err != nil {
		return nil, fmt.Errorf("container runner: engine %s: %w", cfg.Host, err)
	}
	vctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := cli.Ping(vctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("container runner: engine %s: %w", cfg.Host, err)
	}
	v, err := cli.ServerVersion(vctx, client.ServerVersionOptions{})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("container runner: engine %s: %w", cfg.Host, err)
	}
	r := &Runner{cfg: cfg, cli: cli, name: name, engine: strings.TrimSpace(v.Platform.Name + " " + v.Version), nets: map[string]bool{}}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			r.podman = true
			major, _, _ := strings.Cut(c.Version, ".")
			n, err := strconv.Atoi(major)
			r.userns = err == nil && n >= 4
		}
	}
	if err := r.loadNetworks(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return r, nil
}

// Describe says how pods run, for the agent's log.
func (r *Runner) Describe() string {
	net := "a network per project, guarded from the node (nft table inet " + r.guardTable() + ")"
	if r.cfg.Network == NetworkNone {
		net = "no network"
	}
	users := "as each project's uid (no user namespace: the engine maps users only daemon-wide)"
	if r.userns {
		users = "as each project's uid in a user namespace of its project's (uid 0 there is an unprivileged host uid)"
	}
	return fmt.Sprintf("as containers on %s (%s), work directory %s; %s, no capabilities, %s",
		r.cfg.Host, r.engine, r.cfg.WorkDir, users, net)
}

// Close closes the engine's connection; the containers keep running.
func (r *Runner) Close() { _ = r.cli.Close() }

// RecordDir is the runner's directory of pod id (its log).
func (r *Runner) RecordDir(id string) string { return filepath.Join(r.cfg.DataDir, id) }

// PodDir is the working directory of pod id (mounted into its container).
func (r *Runner) PodDir(id string) string { return filepath.Join(r.cfg.WorkDir, id) }

// containerName is pod id's container: one per runner and pod, so that the
// engine itself refuses a second.
func (r *Runner) containerName(id string) string { return "runway-" + r.name + "-" + id }

func validID(id string) bool {
	return id != "" && id != "." && id != ".." && strings.Trim(id,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == "" && id[0] != '.' && id[0] != '-'
}

// Remove deletes a finished pod's container, directories and log.
func (r *Runner) Remove(id string) error {
	if !validID(id) {
		return fmt.Errorf("remove pod: invalid id %q", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	c, _ := r.inspect(ctx, r.containerName(id))
	_, err := r.cli.ContainerRemove(ctx, r.containerName(id), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("remove pod %s's container: %w", id, err)
	} else if c.Config != nil && strings.Contains(c.Config.Labels[LabelNetwork], ".") {
		r.dropNetwork(c.Config.Labels[LabelNetwork]) // a distributed training's own
	}
	return errors.Join(err, r.removeVolumes(ctx, id), os.RemoveAll(r.RecordDir(id)), os.RemoveAll(r.PodDir(id)))
}

// Reap kills and removes the containers of this runner that still run
// though their pod is not bound (its binding was deleted while no agent
// ran). Ended ones stay, with their logs, for the agent's collection.
func (r *Runner) Reap(bound func(project, workload string, pod int) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	list, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelRunner+"="+r.name)})
	if err != nil {
		return // the next agent start tries again
	}
	for _, c := range list.Items {
		l := c.Labels
		pod, err := strconv.Atoi(l[LabelPod])
		if c.State == container.StateExited || (err == nil && bound(l[LabelProject], l[LabelWorkload], pod)) {
			continue
		}
		_, _ = r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

// CPU is the CPU time each pod has used.
func (r *Runner) CPU(pods ...runner.Pod) []time.Duration {
	out := make([]time.Duration, len(pods))
	for i, p := range pods {
		out[i] = p.CPU()
	}
	return out
}

// Usage is the CPU time and memory each pod uses: CPU from its cgroup
// where the agent can read it, memory from the engine's stats.
func (r *Runner) Usage(pods ...runner.Pod) []runner.Usage {
	out := make([]runner.Usage, len(pods))
	for i, p := range pods {
		out[i] = runner.Usage{CPU: p.CPU(), MemoryBytes: p.(*pod).memory()}
	}
	return out
}

// Start runs the pod's container, or adopts the one already there: a
// running container (an earlier agent was killed) is followed, not started
// again; an exited one gives its exit at once.
func (r *Runner) Start(spec runner.Spec) (runner.Pod, error) {
	if !validID(spec.ID) {
		return nil, fmt.Errorf("start pod: invalid id %q", spec.ID)
	}
	if spec.Image == "" {
		return nil, fmt.Errorf("start pod %q: the workload has no image", spec.ID)
	}
	ctx := context.Background()
	name := r.containerName(spec.ID)
	rev := strconv.FormatInt(spec.Revision, 10)
	c, err := r.inspect(ctx, name)
	origin := runner.Adopted
	var labels map[string]string
	if err == nil && c.Config != nil {
		labels = c.Config.Labels
	}
	if was, labelled := labels[LabelRevision]; labelled && was != rev {
		// An earlier binding's, deleted while no agent ran (a container of
		// an agent older than the label is adopted).
		rctx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, err = r.cli.ContainerRemove(rctx, c.ID, client.ContainerRemoveOptions{Force: true})
		cancel()
		if err == nil || cerrdefs.IsNotFound(err) {
			err = cerrdefs.ErrNotFound
		}
	}
	if cerrdefs.IsNotFound(err) {
		origin = runner.Started
		if b, rerr := os.ReadFile(filepath.Join(r.RecordDir(spec.ID), revisionName)); rerr == nil && string(b) == rev {
			origin = runner.Restarted // its container went (with its exit) while no agent ran
			if spec.Restarting != nil {
				spec.Restarting()
			}
		}
		c, err = r.create(ctx, spec, name)
	}
	if err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	if c.State != nil && c.State.Status == container.StateCreated {
		if origin == runner.Adopted { // created by an agent killed before it started it: never ran
			origin = runner.Started
		}
		sctx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, err := r.cli.ContainerStart(sctx, c.ID, client.ContainerStartOptions{})
		cancel()
		if err != nil {
			_, _ = r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
		}
		if c, err = r.inspect(ctx, c.ID); err != nil {
			return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
		}
	}
	p := r.follow(spec.ID, c)
	p.origin = origin
	return p, nil
}

// revisionName is the file in a pod's record directory naming the
// revision its container was created for: a container gone with its
// exit (removed, the engine's storage lost) while no agent ran is a pod
// that died, not one never started.
const revisionName = "revision"

func (r *Runner) inspect(ctx context.Context, name string) (container.InspectResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	res, err := r.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	return res.Container, err
}

// create creates the pod's container (pulling its image when the engine
// has none), or finds the one a concurrent start created.
func (r *Runner) create(ctx context.Context, spec runner.Spec, name string) (container.InspectResponse, error) {
	rec, work := r.RecordDir(spec.ID), r.PodDir(spec.ID)
	for _, d := range []string{rec, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return container.InspectResponse{}, err
		}
	}
	rev := strconv.FormatInt(spec.Revision, 10)
	if err := os.WriteFile(filepath.Join(rec, revisionName), []byte(rev), 0o600); err != nil {
		return container.InspectResponse{}, err
	}
	devices := spec.Devices
	if len(spec.CDIDevices) > 0 { // the container sees only its devices, from 0
		devices = make([]int, len(spec.CDIDevices))
		for i := range devices {
			devices[i] = i
		}
	}
	imageUser, err := r.imageUser(ctx, spec)
	if err != nil {
		return container.InspectResponse{}, err
	}
	uid, gid := podUser(spec, imageUser)
	userns, hostUID, hostGID := r.userNS(spec.Project, uid, gid)
	if err := os.Chown(work, int(hostUID), int(hostGID)); err != nil {
		return container.InspectResponse{}, fmt.Errorf("give the work directory to the pod's uid: %w", err)
	}
	netMode, err := r.network(ctx, spec)
	if err != nil {
		return container.InspectResponse{}, err
	}
	host, err := r.hostConfig(spec, work, netMode)
	if err != nil {
		return container.InspectResponse{}, err
	}
	host.UsernsMode = container.UsernsMode(userns)
	binds, err := credentialFiles(spec.Files, rec, uid, gid)
	if err != nil {
		return container.InspectResponse{}, err
	}
	host.Binds = append(host.Binds, binds...)
	data, err := r.dataBinds(ctx, spec.ID, spec.Mounts, hostUID, hostGID)
	if err != nil {
		return container.InspectResponse{}, err
	}
	host.Binds = append(host.Binds, data...)
	cfg := &container.Config{
		Image:      spec.Image,
		User:       fmt.Sprintf("%d:%d", uid, gid),
		Env:        runner.Environ(spec, work, devices),
		WorkingDir: work,
		Labels:     map[string]string{},
	}
	maps.Copy(cfg.Labels, spec.Labels) // the workload's, under the runner's own
	maps.Copy(cfg.Labels, map[string]string{LabelRunner: r.name, LabelPodID: spec.ID, LabelProject: spec.Project,
		LabelWorkload: workloadID(spec.Workload), LabelWorkloadUID: spec.WorkloadUID, LabelPod: strconv.Itoa(spec.Pod),
		LabelRevision: rev, LabelNetwork: networkKey(spec)})
	if len(spec.Command) > 0 { // the workload's command replaces the image's entrypoint, as on Kubernetes
		cfg.Entrypoint, cfg.Cmd = spec.Command, []string{}
	}
	publish(spec, cfg, host)
	opts := client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host}
	if spec.Hostname != "" && netMode != NetworkNone {
		// A distributed training's pod: found by its name on its workload's network.
		cfg.Hostname = spec.Hostname
		opts.NetworkingConfig = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			netMode: {Aliases: []string{spec.Hostname}}}}
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	_, err = r.cli.ContainerCreate(cctx, opts)
	cancel()
	if err != nil && !cerrdefs.IsConflict(err) { // a conflict: created meanwhile, adopted below
		return container.InspectResponse{}, err
	}
	return r.inspect(ctx, name)
}

// workloadID is the workload's id in projects/{project}/workloads/{id}.
func workloadID(name string) string { return name[strings.LastIndex(name, "/")+1:] }
