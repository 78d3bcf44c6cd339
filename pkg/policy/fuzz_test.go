package policy_test

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/policy"
)

// FuzzPolicy: any policy the REST API could decode is normalized (its
// violations listed) and merged without a panic.
func FuzzPolicy(f *testing.F) {
	f.Add(`{"defaults":{"spec.gpu.devices":1},"rules":{"spec.gpu.devices":{"max":2}}}`)
	f.Add(`{"rules":{"spec.image":{"required":true,"options":["a","b"]}}}`)
	f.Add(`{"rules":{"nope":{}}}`)
	f.Fuzz(func(t *testing.T, js string) {
		p := &workloadv1.Policy{}
		if protojson.Unmarshal([]byte(js), p) != nil {
			return
		}
		policy.Normalize(p)
		eff := policy.Merge([]policy.Layer{{Policy: p, Source: "projects/a"}})
		final := eff.Apply(&workloadv1.WorkloadSpec{})
		_ = eff.Check("workload.spec.", &workloadv1.WorkloadSpec{}, final)
	})
}
