package runner

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// LogName is the name of a pod's log file in its record directory: the
// node agent serves it (runway workload logs), whatever the runtime.
const LogName = "output.log"

// Environment variables every pod gets.
const (
	EnvVisibleDevices = "CUDA_VISIBLE_DEVICES"
	EnvWorkload       = "RUNWAY_WORKLOAD"  // projects/{project}/workloads/{workload}
	EnvProject        = "RUNWAY_PROJECT"   // the project id
	EnvPodIndex       = "RUNWAY_POD_INDEX" // the pod's index in its gang
	EnvFractionMilli  = "RUNWAY_GPU_FRACTION_MILLI"
	EnvGPUMemoryLimit = "RUNWAY_GPU_MEMORY_LIMIT_BYTES"
)

// PodPath is the PATH every pod gets; nothing else of the agent's
// environment reaches it.
const PodPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Spec is one pod to run.
type Spec struct {
	// ID names the pod's directories (and its container); unique per pod
	// on the node, made of [A-Za-z0-9._-] (the agent uses "{workload
	// uid}.{pod}").
	ID string
	// Image is the workload's image (the container runtime runs it; the
	// process runtime ignores it).
	Image string
	// Command is the program and its arguments. Required by the process
	// runtime; a container without one runs its image's entrypoint.
	Command []string
	// Env is the workload's KEY=VALUE pairs; the RUNWAY_* variables win
	// over them.
	Env []string
	// Workload is projects/{project}/workloads/{workload}; Project its
	// id, WorkloadUID its uid (a container's label).
	Workload, Project, WorkloadUID string
	// Labels are the workload's own (never a platform prefix: the
	// workload service refuses those), put on the container or pod.
	Labels map[string]string
	// Pod is the pod's index in its gang.
	Pod int
	// Hostname is set for a pod of a distributed training: its name,
	// {workload}-master-0 or {workload}-worker-K (pkg/framework.Host). The
	// container runtime then puts the workload's pods on a network of their
	// own, each with its name as DNS alias; the process runtime ignores it.
	Hostname string
	// Revision names this run of the pod (the agent: its binding's
	// ModRevision, the placement): a pod an earlier runner on the same data directory left
	// is adopted only by a Start of the same revision.
	Revision int64
	// Restarting, when set, is called once Start has decided to start
	// the pod again (Origin Restarted), before the run starts: what it
	// keeps (the agent's restart count) is on disk before the pod can run a
	// second time, so an agent killed as the pod starts again still says it
	// restarted.
	Restarting func() `json:"-"`
	// Devices are the GPU indexes the pod may use (CUDA_VISIBLE_DEVICES);
	// none hides every GPU.
	Devices []int
	// CDIDevices are the CDI names of those devices
	// (nvidia.com/gpu=UUID) where the GPU backend is NVIDIA's: a container
	// gets them, and sees them as devices 0..n-1.
	CDIDevices []string
	// FractionMilli is the share of each device, 1000 for whole devices.
	FractionMilli int64
	// GPUMemoryBytes is the device memory the pod may use; 0 is no limit.
	GPUMemoryBytes int64
	// MilliCPU and MemoryBytes are the workload's CPU and memory: a
	// container's limits (0: none).
	MilliCPU, MemoryBytes int64
	// RunAsRoot and AddCapabilities relax the container runtime's
	// isolation (a non-root user, no capabilities) as a policy allowed at
	// submit (pkg/policy.Relaxations).
	RunAsRoot       bool
	AddCapabilities []string
	// Files are the pod's credential files (CredentialService.
	// ResolvePodCredentials), each at its absolute path, mode 0400 and
	// owned by the pod's user. Runners keep them off the node's disk where
	// they can (a tmpfs) and never log them.
	Files []File
	// PullPolicy is when the container runtime pulls Image (the process
	// runtime runs no image).
	PullPolicy PullPolicy
	// Registry, when set, is the credential Image is pulled with: the
	// runner hands it to the engine only, and never logs it.
	Registry *RegistryAuth `json:"-"`
	// Mounts are the pod's data sources (the workload's data_sources,
	// resolved by the agent: a git repository is a directory it cloned).
	Mounts []Mount
	// Ports are the container ports the pod's tools listen on. The
	// container runtime publishes each on the node's loopback only, on a
	// port of the engine's choosing (Published); other runtimes ignore them.
	Ports []int
}

// PullPolicy says when an image is pulled.
type PullPolicy int

const (
	// PullIfNotPresent pulls an image the engine does not have.
	PullIfNotPresent PullPolicy = iota
	// PullAlways pulls it each time a pod starts.
	PullAlways
	// PullNever never pulls: an image the engine lacks fails the pod.
	PullNever
)

// RegistryAuth is a registry's user name and password, and the name of
// the credential that holds them.
type RegistryAuth struct {
	Credential                 string
	Server, Username, Password string
}

// Mount is one data source a pod sees at Target: a directory of the node
// (HostPath), bound, or an NFS export (NFSServer, NFSPath) the runtime
// mounts. Paths hold no ':' or ',' (the workload service's rule).
type Mount struct {
	Target   string
	ReadOnly bool
	HostPath string
	// Owned: HostPath was made for this pod (a clone) and is given to the
	// pod's user before it starts, so that a read-write mount is writable.
	Owned              bool
	NFSServer, NFSPath string
}

// File is one file a pod sees at Path.
type File struct {
	Path string
	Data []byte
}

// Exit is how a pod ended.
type Exit struct {
	// Code is the exit status; 128+signal when a signal killed it (the
	// shell's convention).
	Code int
	// Signaled is true when a signal ended the process.
	Signaled bool
	// Stopped is true when Stop was called before it ended.
	Stopped bool
	// OOMKilled is true when the kernel killed it over its memory limit.
	OOMKilled bool
}

// Origin is how Start came by a pod.
type Origin int

const (
	// Started: a new run.
	Started Origin = iota
	// Adopted: the run of the same revision that an earlier runner on the
	// same data directory started (its agent was killed): followed where
	// it still runs, its exit given where it ended meanwhile; never
	// started twice.
	Adopted
	// Restarted: an earlier runner started the run of the same revision,
	// and it died with no exit recorded while no runner followed it (its
	// processes or container killed with its agent, the node rebooted):
	// started again.
	Restarted
)

// Usage is what a pod uses of the node.
type Usage struct {
	// CPU is its CPU time so far.
	CPU time.Duration
	// MemoryBytes is the memory it holds now.
	MemoryBytes int64
}

// Runner starts pods. Implementations are safe for concurrent use.
type Runner interface {
	// Start starts the pod (or adopts the one an earlier runner on the
	// same data directory left) and returns at once; watch Pod.Done for
	// its end.
	Start(Spec) (Pod, error)
	// RecordDir is the runner's directory of pod id: its log (LogName)
	// and the agent's records, never readable by pods.
	RecordDir(id string) string
	// PodDir is the working directory of pod id.
	PodDir(id string) string
	// Remove deletes a finished pod's directories, log (and container).
	Remove(id string) error
	// CPU is the CPU time each pod has used, in one pass for all.
	CPU(ps ...Pod) []time.Duration
	// Usage is the CPU time and memory each pod uses, in one pass for all.
	Usage(ps ...Pod) []Usage
	// Describe says in a few words how pods run, for the agent's log.
	Describe() string
	// Close releases what the runner holds; pods keep running.
	Close()
}

// Pod is one started pod.
type Pod interface {
	// Pid is its first process's id on the host.
	Pid() int
	// Dir is its working directory on the host.
	Dir() string
	// LogPath is the file holding its stdout and stderr.
	LogPath() string
	// Done is closed when the pod has ended (and its log is complete).
	Done() <-chan struct{}
	// Exit is how it ended; valid once Done is closed.
	Exit() Exit
	// Owns reports whether a host pid is one of the pod's processes (how
	// NVML's processes are attributed to pods).
	Owns(pid int) bool
	// Freeze stops every process of the pod (true) or continues them
	// (false): the time-slicing enforcer's lever.
	Freeze(on bool)
	// CPU is the pod's CPU time so far.
	CPU() time.Duration
	// Stop ends the pod: SIGTERM, then SIGKILL after the runner's grace
	// period or once ctx is done; it returns when the pod has ended.
	Stop(ctx context.Context)
	// Kill ends the pod at once with SIGKILL and returns when it has
	// ended (a pod over its GPU memory slice keeps nothing through a
	// grace period).
	Kill()
	// Origin says whether Start started, adopted or restarted it.
	Origin() Origin
}

// Published is a pod whose Spec.Ports are reachable on its node.
type Published interface {
	// Addresses maps each published container port to the address it is
	// reached at on the node (127.0.0.1:PORT).
	Addresses() map[int]string
}

// Reaper is a runner whose pods outlive the agent: after its
// first look at the node's bindings the agent hands it the bindings it
// has, and the runner removes the pods of any other.
type Reaper interface {
	Reap(bound func(project, workload string, pod int) bool)
}

// Environ is a pod's whole environment: a minimal PATH and HOME/TMPDIR
// (home), the workload's variables, then Runway's, with devices as
// CUDA_VISIBLE_DEVICES.
func Environ(spec Spec, home string, devices []int) []string {
	devs := make([]string, len(devices))
	for i, d := range devices {
		devs[i] = strconv.Itoa(d)
	}
	env := []string{"PATH=" + PodPath, "HOME=" + home, "TMPDIR=" + home}
	env = append(env, spec.Env...)
	return append(env,
		EnvVisibleDevices+"="+strings.Join(devs, ","),
		EnvWorkload+"="+spec.Workload,
		EnvProject+"="+spec.Project,
		EnvPodIndex+"="+strconv.Itoa(spec.Pod),
		EnvFractionMilli+"="+strconv.FormatInt(spec.FractionMilli, 10),
		EnvGPUMemoryLimit+"="+strconv.FormatInt(spec.GPUMemoryBytes, 10),
	)
}
