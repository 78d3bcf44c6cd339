package quota_test

import (
	"testing"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// TestQueues: what the scheduler feeds cluster.State, from stored resources.
func TestQueues(t *testing.T) {
	e := newEnv(t)
	e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	d := e.mustCreateDepartment(t, "research", gpus("dgx", 6))
	p := e.mustCreateProject(t, "team-a", "departments/research", gpus("dgx", 2))
	def, err := e.client.GetDepartment(t.Context(), &quotav1.GetDepartmentRequest{Name: "departments/default"})
	if err != nil {
		t.Fatal(err)
	}

	s := cluster.New()
	s.AddPool("dgx")
	id, quotas := clusterproto.DepartmentQueue(d)
	if _, err := s.AddDepartment(id, quotas); err != nil {
		t.Fatal(err)
	}
	id, quotas = clusterproto.DepartmentQueue(def)
	if _, err := s.AddDepartment(id, quotas); err != nil {
		t.Fatal(err)
	}
	pid, dept, pq := clusterproto.ProjectQueue(p)
	q, err := s.AddProject(pid, dept, pq)
	if err != nil {
		t.Fatal(err)
	}
	dgx := s.Pool("dgx").Index
	if q.Parent.Name != "research" || q.Quotas[dgx].Deserved.GPU != 2000 || q.Parent.Quotas[dgx].Deserved.GPU != 6000 {
		t.Fatalf("project %s in %s with %v, department %v", q.Name, q.Parent.Name, q.Quotas[dgx], q.Parent.Quotas[dgx])
	}
	if got := s.Queue("default").Quotas[dgx].Deserved.GPU; got != cluster.Unlimited {
		t.Fatalf("departments/default deserves %d GPUs in dgx, want unlimited", got)
	}
}
