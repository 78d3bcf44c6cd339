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

// seed is where the random clusters start unless -rapid.seed says
// otherwise, so that make test plays the same ones on every clean clone;
// -rapid.seed=0 explores from a random seed (and rapid saves what fails
// under testdata/rapid, to replay).
const seed = 20261202

// The scheduler starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) {
	flag.Parse()
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range map[string]int{"rapid.checks": checks, "rapid.seed": seed} {
		if !given[name] {
			if err := flag.Set(name, strconv.Itoa(v)); err != nil {
				panic(err)
			}
		}
	}
	goleak.VerifyTestMain(m)
}
