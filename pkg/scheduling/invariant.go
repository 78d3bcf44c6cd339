package scheduling

import "fmt"

// InvariantError is what the cycle panics with when a rule it relies on
// does not hold (a bug, or a model that is not what it should be). It
// names the workload being placed, so a caller that recovers can set that
// workload aside and go on with the others.
type InvariantError struct {
	Workload string // cluster ID of the workload the cycle was placing
	What     string
}

func (e InvariantError) Error() string {
	return fmt.Sprintf("scheduling invariant failed placing %s: %s", e.Workload, e.What)
}
