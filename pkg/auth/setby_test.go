package auth

import "testing"

// Covers: the account changes anything; a department what it or its
// projects set, never the account's or another department's; a project
// only its own; a setter not recorded is the account's.
func TestCovers(t *testing.T) {
	for _, c := range []struct {
		acting, setBy, department string
		want                      bool
	}{
		{AccountScope, AccountScope, "", true},
		{AccountScope, "departments/a", "", true},
		{AccountScope, "projects/p", "departments/a", true},
		{AccountScope, "", "", true},
		{"departments/a", "departments/a", "", true},
		{"departments/a", "projects/p", "departments/a", true},
		{"departments/a", AccountScope, "", false},
		{"departments/a", "", "departments/a", false},
		{"departments/a", "departments/b", "", false},
		{"departments/a", "projects/p", "departments/b", false},
		{"projects/p", "projects/p", "departments/a", true},
		{"projects/p", "projects/q", "departments/a", false},
		{"projects/p", "departments/a", "departments/a", false},
		{"projects/p", AccountScope, "departments/a", false},
		{"", "departments/a", "", false},
	} {
		if got := Covers(c.acting, c.setBy, c.department); got != c.want {
			t.Errorf("Covers(%q, %q, %q) = %v, want %v", c.acting, c.setBy, c.department, got, c.want)
		}
	}
}
