package clusterproto_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

func TestToClusterQuota(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *quotav1.NodePoolQuota
		base cluster.Quota
		want cluster.Quota
	}{
		{
			"an entry with nothing set takes the project defaults",
			&quotav1.NodePoolQuota{NodePool: "nodepools/default"},
			cluster.DefaultQuota(),
			cluster.DefaultQuota(),
		},
		{
			"an entry with nothing set in the default department is unlimited",
			&quotav1.NodePoolQuota{NodePool: "nodepools/default"},
			cluster.UnlimitedQuota(),
			cluster.UnlimitedQuota(),
		},
		{
			"every field set, each resource with its own weight",
			&quotav1.NodePoolQuota{
				NodePool: "nodepools/dgx",
				Gpu:      &quotav1.GpuQuota{DeservedMilliGpus: i64(2000), LimitMilliGpus: i64(4000), OverQuotaWeight: i32(3), OverQuotaEnabled: yes(true)},
				Cpu:      &quotav1.CpuQuota{DeservedMilliCpu: i64(8000), LimitMilliCpu: i64(-1), OverQuotaWeight: i32(2), OverQuotaEnabled: yes(true)},
				Memory:   &quotav1.MemoryQuota{DeservedMemoryBytes: i64(-1), LimitMemoryBytes: i64(1 << 30), OverQuotaWeight: i32(5), OverQuotaEnabled: yes(true)},
			},
			cluster.DefaultQuota(),
			cluster.Quota{
				Deserved: cluster.Resources{GPU: 2000, CPU: 8000, Memory: -1},
				Limit:    cluster.Resources{GPU: 4000, CPU: -1, Memory: 1 << 30},
				Weight:   cluster.Weights{3, 2, 5}, OverQuota: true,
			},
		},
		{
			"GPU over-quota off is the model's switch",
			&quotav1.NodePoolQuota{Gpu: &quotav1.GpuQuota{DeservedMilliGpus: i64(2000), OverQuotaEnabled: yes(false)}},
			cluster.DefaultQuota(),
			cluster.Quota{
				Deserved: cluster.Resources{GPU: 2000, CPU: -1, Memory: -1},
				Limit:    cluster.Resources{GPU: 2000, CPU: -1, Memory: -1},
				Weight:   cluster.SameWeights(1), OverQuota: false,
			},
		},
		{
			"CPU over-quota off caps CPU only, through its limit",
			&quotav1.NodePoolQuota{
				Gpu: &quotav1.GpuQuota{DeservedMilliGpus: i64(2000)},
				Cpu: &quotav1.CpuQuota{DeservedMilliCpu: i64(8000), OverQuotaEnabled: yes(false)},
			},
			cluster.DefaultQuota(),
			cluster.Quota{
				Deserved: cluster.Resources{GPU: 2000, CPU: 8000, Memory: -1},
				Limit:    cluster.Resources{GPU: -1, CPU: 8000, Memory: -1},
				Weight:   cluster.SameWeights(1), OverQuota: true,
			},
		},
		{
			"GPU over-quota off with CPU on keeps the switch on so CPU is not capped",
			&quotav1.NodePoolQuota{
				Gpu: &quotav1.GpuQuota{DeservedMilliGpus: i64(2000), OverQuotaEnabled: yes(false)},
				Cpu: &quotav1.CpuQuota{DeservedMilliCpu: i64(8000)},
			},
			cluster.DefaultQuota(),
			cluster.Quota{
				Deserved: cluster.Resources{GPU: 2000, CPU: 8000, Memory: -1},
				Limit:    cluster.Resources{GPU: 2000, CPU: -1, Memory: -1},
				Weight:   cluster.SameWeights(1), OverQuota: true,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clusterproto.ToClusterQuota(tc.in, tc.base)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("ToClusterQuota (-want +got):\n%s", diff)
			}
			for r := cluster.Resource(0); r < cluster.NumResources; r++ {
				if got.EffectiveLimit(r) != tc.want.EffectiveLimit(r) {
					t.Fatalf("EffectiveLimit(%v) = %d, want %d", r, got.EffectiveLimit(r), tc.want.EffectiveLimit(r))
				}
			}
		})
	}
}

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }
func yes(v bool) *bool   { return &v }
