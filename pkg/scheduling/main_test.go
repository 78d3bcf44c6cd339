package scheduling_test

import (
	"flag"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// checks is how many random clusters each property draws unless
// -rapid.checks says otherwise: enough to meet gangs, fractions, limits and
// lost nodes together, and fast on two cores.
const checks = 150

// The scheduler starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", strconv.Itoa(checks)); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
