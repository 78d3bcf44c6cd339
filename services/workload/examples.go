package workload

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// The examples the product's quick start uses, created at the account scope
// by `runway dev` (Config.Examples): submit with
// `--environment quick-start --compute one-gpu` (or `two-gpus`).
var (
	exampleEnvironments = map[string]*workloadv1.Environment{
		"quick-start": {
			Description: "The quick start's training: the demo image; the local runner runs the command (the image is a label there).",
			Image:       "runai.jfrog.io/demo/quickstart",
			Command:     []string{"sleep", "600"},
		},
	}
	exampleComputeResources = map[string]*workloadv1.ComputeResource{
		"one-gpu":  {Description: "One whole GPU per pod.", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}},
		"two-gpus": {Description: "Two whole GPUs per pod.", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 2}}},
	}
)

// createExamples stores the example assets that are missing; ones that
// exist (created earlier, or changed by an admin) are left as they are.
func (g *Governance) createExamples(ctx context.Context) error {
	now := timestamppb.New(g.clock.Now())
	for id, e := range exampleEnvironments {
		e = proto.Clone(e).(*workloadv1.Environment)
		e.Name, e.CreateTime = scopedName("", envsCollection, id), now
		if _, err := g.envs.Create(ctx, storeKey("", id), e); err != nil && !errors.Is(err, etcdstore.ErrAlreadyExists) {
			return fmt.Errorf("create example environment %s: %w", id, err)
		}
	}
	for id, c := range exampleComputeResources {
		c = proto.Clone(c).(*workloadv1.ComputeResource)
		c.Name, c.CreateTime = scopedName("", computeCollection, id), now
		if _, err := g.computes.Create(ctx, storeKey("", id), c); err != nil && !errors.Is(err, etcdstore.ErrAlreadyExists) {
			return fmt.Errorf("create example compute resource %s: %w", id, err)
		}
	}
	return nil
}
