package workload

import (
	"testing"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

func TestParseFilter(t *testing.T) {
	w := &workloadv1.Workload{
		Type:   workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		Spec:   &workloadv1.WorkloadSpec{Image: "x"}, // priority by default: build
		Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING, NodePool: "nodepools/a100"},
	}
	for expr, want := range map[string]bool{
		"":                               true,
		"type = WORKSPACE":               true,
		"type = WORKLOAD_TYPE_WORKSPACE": true,
		"type != WORKSPACE":              false,
		"type=TRAINING":                  false,
		"status.phase = RUNNING AND spec.priority = build":          true,
		`status.node_pool = "nodepools/a100"`:                       true,
		`status.node_pool != "nodepools/a100" AND type = WORKSPACE`: false,
		`spec.priority = "train"`:                                   false,
	} {
		t.Run(expr, func(t *testing.T) {
			f, err := parseFilter(expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.matches(w); got != want {
				t.Errorf("matches = %v, want %v", got, want)
			}
		})
	}
}

func TestParseFilter_Invalid(t *testing.T) {
	for name, expr := range map[string]string{
		"an unsupported field":            "spec.image = x",
		"a quoted field":                  `"type" = WORKSPACE`,
		"an unknown enum value":           "type = BATCH",
		"the unspecified enum value":      "status.phase = UNSPECIFIED",
		"a missing value":                 "type =",
		"an operator that is not = or !=": "type < WORKSPACE",
		"a lone !":                        "type ! WORKSPACE",
		"OR":                              "type = WORKSPACE OR type = TRAINING",
		"a lowercase and":                 "type = WORKSPACE and type = TRAINING",
		"an unterminated string":          `status.node_pool = "nodepools/a100`,
		"a trailing AND":                  "type = WORKSPACE AND",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseFilter(expr)
			if got := apierr.Reason(err); got != "INVALID_FILTER" {
				t.Errorf("parseFilter(%q) = %v, want INVALID_FILTER", expr, err)
			}
		})
	}
}
