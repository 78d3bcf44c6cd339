package framework_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runwayhq/runway/pkg/framework"
)

// names is a 1 + 2 gang on a network of its own: the master with no GPU,
// workers with 2 and 1.
func names(k framework.Kind) framework.Gang {
	return framework.Gang{Kind: k, ID: "uid-1", Pods: []framework.Pod{
		{Host: "t-master-0", Port: k.DefaultPort()},
		{Host: "t-worker-1", Port: k.DefaultPort(), GPUs: 2},
		{Host: "t-worker-2", Port: k.DefaultPort(), GPUs: 1},
	}}
}

func TestGang_Env(t *testing.T) {
	local := framework.Gang{Kind: framework.PyTorch, ID: "u", MinPods: 2, Pods: []framework.Pod{
		{Host: "127.0.0.1", Port: 30000}, {Host: "127.0.0.1", Port: 30001, GPUs: 4}, {Host: "127.0.0.1", Port: 30002}}}
	tests := map[string]struct {
		gang framework.Gang
		pod  int
		want []string // a subset, each KEY=VALUE exactly
	}{
		"pytorch master: rank 0, the master's own address, one process without GPUs": {
			gang: names(framework.PyTorch), pod: 0,
			want: []string{"MASTER_ADDR=t-master-0", "MASTER_PORT=29500", "WORLD_SIZE=3", "RANK=0", "NODE_RANK=0",
				"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "PET_NNODES=3", "PET_NPROC_PER_NODE=1", "PET_RDZV_ENDPOINT=t-master-0:29500"},
		},
		"pytorch worker 1: rank 1, a process per GPU for torchrun": {
			gang: names(framework.PyTorch), pod: 1,
			want: []string{"MASTER_ADDR=t-master-0", "RANK=1", "NODE_RANK=1", "PET_NODE_RANK=1", "PET_NPROC_PER_NODE=2", "PET_RDZV_ID=uid-1"},
		},
		"pytorch elastic on one machine: nnodes MIN:MAX, the master's port of the block": {
			gang: local, pod: 1,
			want: []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=30000", "PET_NNODES=2:3", "PET_NPROC_PER_NODE=4", "PET_RDZV_ENDPOINT=127.0.0.1:30000"},
		},
		"tensorflow worker 2: task worker 1, the chief and both workers in the cluster": {
			gang: names(framework.TensorFlow), pod: 2,
			want: []string{`TF_CONFIG={"cluster":{"chief":["t-master-0:2222"],"worker":["t-worker-1:2222","t-worker-2:2222"]},"task":{"index":1,"type":"worker"}}`},
		},
		"tensorflow master: the chief": {
			gang: names(framework.TensorFlow), pod: 0,
			want: []string{`TF_CONFIG={"cluster":{"chief":["t-master-0:2222"],"worker":["t-worker-1:2222","t-worker-2:2222"]},"task":{"index":0,"type":"chief"}}`},
		},
		"jax process 2 of 3 with the coordinator on pod 0": {
			gang: names(framework.JAX), pod: 2,
			want: []string{"JAX_COORDINATOR_ADDRESS=t-master-0:6666", "JAX_NUM_PROCESSES=3", "JAX_PROCESS_ID=2"},
		},
		"xgboost: the tracker on pod 0 and the world size": {
			gang: names(framework.XGBoost), pod: 1,
			want: []string{"DMLC_TRACKER_URI=t-master-0", "DMLC_TRACKER_PORT=9999", "DMLC_NUM_WORKER=3", "DMLC_TASK_ID=1", "WORLD_SIZE=3", "RANK=1"},
		},
		"mpi launcher: the hostfile's path and the workers": {
			gang: names(framework.MPI), pod: 0,
			want: []string{"OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile", "RUNWAY_MPI_WORKERS=t-worker-1,t-worker-2", "RUNWAY_POD_COUNT=3"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.gang.Env(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %s in %q", w, got)
				}
			}
			seen := map[string]bool{}
			for _, kv := range got {
				k, _, _ := strings.Cut(kv, "=")
				if seen[k] {
					t.Errorf("%s set twice", k)
				}
				seen[k] = true
			}
		})
	}
}

func TestGang_EnvOutOfRange(t *testing.T) {
	if _, err := names(framework.PyTorch).Env(3); err == nil {
		t.Fatal("pod 3 of 3: want an error")
	}
}

func TestGang_Hostfile(t *testing.T) {
	got := string(names(framework.MPI).Hostfile())
	want := "t-worker-1 slots=2\nt-worker-2 slots=1\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}
}

func TestHostAndPorts(t *testing.T) {
	if got := framework.Host("t", 0); got != "t-master-0" {
		t.Errorf("Host(t, 0) = %s", got)
	}
	if got := framework.Host("t", 7); got != "t-worker-7" {
		t.Errorf("Host(t, 7) = %s", got)
	}
	p := framework.Ports("some-uid", 1000)
	if p[0] < 20000 || p[999] >= 60000 || p[999] != p[0]+999 {
		t.Errorf("Ports: %d..%d, want a block of 1000 within 20000-59999", p[0], p[999])
	}
	if q := framework.Ports("other-uid", 1000); q[0] == p[0] {
		t.Errorf("two uids drew the same base %d", p[0])
	}
}
