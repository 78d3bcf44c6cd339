package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// binary is the runway command, built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runway-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "runway")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

// runBinary runs `runway sim run path` and returns its exit code and output.
func runBinary(t *testing.T, path string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(binary, "sim", "run", path)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run %s: %v", binary, err)
	}
	return code, out.String(), errOut.String()
}

func writeScenario(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A passing scenario exits 0 with the result as JSON on stdout, nothing on
// stderr, and the same bytes every time.
func TestSimRunPasses(t *testing.T) {
	path := "../../scenarios/seed-quickstart.yaml"
	code, stdout, stderr := runBinary(t, path)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	var out struct {
		Scenario     string
		Expectations struct{ Passed, Failed int }
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if out.Scenario != "seed-quickstart" || out.Expectations.Failed != 0 || out.Expectations.Passed == 0 {
		t.Errorf("scenario %q, expectations %+v; want seed-quickstart with all passed", out.Scenario, out.Expectations)
	}
	if _, again, _ := runBinary(t, path); again != stdout {
		t.Errorf("a second run printed other bytes:\n%s\nthen:\n%s", stdout, again)
	}
}

// A failed expectation exits 1 with one readable line per failure on stderr,
// "FILE:LINE: expectation failed: ...", and still prints the result.
func TestSimRunFailedExpectation(t *testing.T) {
	path := writeScenario(t, `name: too-big
nodes:
  - {name: n1, gpus: 2}
projects:
  - {name: p}
actions:
  - submit: {name: a, project: p, gpu: 4}
  - run: 1
  - expect: {running: [a]}
`)
	code, stdout, stderr := runBinary(t, path)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := path + ":9: expectation failed: workload a: want Running, got Pending (needs 4 GPUs on one node; the largest free block is 2 GPUs"
	if !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q; want it to start with %q", stderr, want)
	}
	if !strings.Contains(stderr, "error: "+path+": 1 of 1 expectations failed (1 failed checks)") {
		t.Errorf("stderr %q; want the count of failed checks", stderr)
	}
	if !json.Valid([]byte(stdout)) {
		t.Errorf("stdout is not JSON: %q", stdout)
	}
}

// The closing line counts expect blocks and their failed checks apart: one
// block of three failed checks beside a block that passed is 1 of 2, not
// "3 of 2".
func TestSimRunCountsBlocksAndChecks(t *testing.T) {
	path := writeScenario(t, `name: many-checks
nodes:
  - {name: n1, gpus: 2}
projects:
  - {name: p}
actions:
  - submit: {name: a, project: p, gpu: 4}
  - submit: {name: b, project: p, gpu: 4}
  - run: 1
  - expect: {pending: [a, b]}
  - expect: {running: [a, b], cluster: {allocatedGpus: 2}}
`)
	code, _, stderr := runBinary(t, path)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if got := strings.Count(stderr, "expectation failed:"); got != 3 {
		t.Errorf("stderr %q lists %d failed checks; want 3", stderr, got)
	}
	if !strings.Contains(stderr, "error: "+path+": 1 of 2 expectations failed (3 failed checks)") {
		t.Errorf("stderr %q; want 1 of 2 expectations failed (3 failed checks)", stderr)
	}
}

// A malformed file exits 2 with "FILE:LINE: what is wrong" on stderr and
// nothing on stdout.
func TestSimRunMalformed(t *testing.T) {
	tests := map[string]struct {
		content  string
		wantLine int
	}{
		"an unknown field": {
			content:  "name: bad\nnodes:\n  - {name: n1, gpus: 2, colour: red}\nactions:\n  - run: 1\n",
			wantLine: 3,
		},
		"broken YAML": {
			content:  "name: bad\nnodes: [\n",
			wantLine: 2,
		},
		"a workload of a project nobody declared": {
			content:  "name: bad\nnodes:\n  - {name: n1, gpus: 2}\nactions:\n  - run: 1\n  - submit: {name: a, project: nobody, gpu: 1}\n",
			wantLine: 6,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := writeScenario(t, tc.content)
			code, stdout, stderr := runBinary(t, path)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			want := regexp.MustCompile(`^error: ` + regexp.QuoteMeta(fmt.Sprintf("%s:%d: ", path, tc.wantLine)) + `\S.*\n$`)
			if !want.MatchString(stderr) {
				t.Errorf("stderr %q; want one line matching %s", stderr, want)
			}
		})
	}
}
