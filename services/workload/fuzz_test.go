package workload

import (
	"strings"
	"testing"
)

// FuzzParseFilter: any filter text is parsed or refused, never a panic; a
// parsed filter parses again to the same number of comparisons.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{`status.phase = RUNNING`, `type = "TRAINING" AND spec.priority != low`,
		`name:"a"`, `x = `, `"unterminated`, `a = b AND`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		fl, err := parseFilter(expr)
		if err != nil {
			return
		}
		again, err := parseFilter(expr)
		if err != nil || len(again) != len(fl) {
			t.Fatalf("parse %q twice: %v, %d vs %d", expr, err, len(again), len(fl))
		}
	})
}

// FuzzNames: workload names, parents and resume tokens are parsed or
// refused; what parses names itself again.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"projects/a/workloads/b", "projects/-", "projects/a", "projects//workloads/", "12.3", "1.-1", "projects/A/workloads/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, id, ok := ParseWorkloadName(s); ok && WorkloadName(p, id) != s {
			t.Fatalf("ParseWorkloadName(%q) = %q, %q", s, p, id)
		}
		if p, ok := parseParent(s, true); ok && p != "-" && projectsPrefix+p != s {
			t.Fatalf("parseParent(%q) = %q", s, p)
		}
		if pos, ok := parsePosition(s); ok && (pos.rev < 2 || pos.skip < 0 || !strings.Contains(s, ".")) {
			t.Fatalf("parsePosition(%q) = %v", s, pos)
		}
	})
}
