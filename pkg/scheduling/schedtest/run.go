package schedtest

import (
	"fmt"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// MaxCycles bounds RunUntilStable.
const MaxCycles = 50

// RunUntilStable runs Cycle and Apply at cfg.Now until a plan changes
// nothing, at most MaxCycles times, and returns every plan in order: the
// last one is empty unless the bound was reached (see Stable).
func RunUntilStable(s *cluster.State, cfg scheduling.Config) []scheduling.Plan {
	var plans []scheduling.Plan
	for range MaxCycles {
		plan := scheduling.Cycle(s, cfg)
		plans = append(plans, plan)
		if plan.Empty() {
			break
		}
		if err := scheduling.Apply(s, plan, cfg.Now); err != nil {
			panic(fmt.Sprintf("schedtest: a plan did not apply: %v", err))
		}
	}
	return plans
}

// Stable reports whether RunUntilStable's plans ended with an empty one.
func Stable(plans []scheduling.Plan) bool {
	return len(plans) > 0 && plans[len(plans)-1].Empty()
}
