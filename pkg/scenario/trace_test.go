package scenario

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadSharedTraces(t *testing.T) {
	// Row counts are the line counts of the files (wc -l) minus the header.
	cases := map[string]struct {
		file  string
		jobs  int
		first TraceJob
	}{
		"philly has 10014 whole-GPU jobs": {"philly-dirlab-7d.csv", 10014,
			TraceJob{ID: "p-2499", Duration: 81 * time.Second, GPUs: 1, Queue: "u48", Line: 2}},
		"helios has 3548 jobs": {"helios-dirlab-7d.csv", 3548,
			TraceJob{ID: "h-0", Duration: 84 * time.Second, GPUs: 1, Queue: "u1", Line: 2}},
		"alibaba has 1674 pods with fractions": {"alibaba-openb-7d.csv", 1674,
			TraceJob{ID: "openb-pod-5946", Duration: 3442 * time.Second, GPUs: 0.32, Queue: "be", Line: 2}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			jobs, err := ReadTrace(filepath.Join("../../traces", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != tc.jobs {
				t.Fatalf("%d jobs, want %d", len(jobs), tc.jobs)
			}
			if diff := cmp.Diff(tc.first, jobs[0]); diff != "" {
				t.Errorf("first job (-want +got):\n%s", diff)
			}
			if last := jobs[len(jobs)-1]; last.Line != tc.jobs+1 {
				t.Errorf("last job on line %d, want %d", last.Line, tc.jobs+1)
			}
		})
	}
}

func TestReadTraceValues(t *testing.T) {
	path := writeFile(t, "t.csv", "\ufeffjob_id,submit_seconds,duration_seconds,gpus,queue\r\n"+
		"b,10.5,0.1,0.25,q2\r\n\r\n"+
		"a, 2 ,3600,8,q1\r\n")
	jobs, err := ReadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceJob{ // file order, not sorted
		{ID: "b", Submit: 10500 * time.Millisecond, Duration: 100 * time.Millisecond, GPUs: 0.25, Queue: "q2", Line: 2},
		{ID: "a", Submit: 2 * time.Second, Duration: time.Hour, GPUs: 8, Queue: "q1", Line: 4},
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

func TestReadTraceErrors(t *testing.T) {
	const header = "job_id,submit_seconds,duration_seconds,gpus,queue\n"
	cases := map[string]struct {
		content string
		line    int
		phrase  string
	}{
		"an empty file has no header":        {"", 1, "empty file; want the header"},
		"columns in another order":           {"job_id,gpus,submit_seconds,duration_seconds,queue\n", 1, "header is"},
		"a missing header":                   {"j1,0,10,1,q\n", 1, `header is "j1,0,10,1,q"`},
		"a row with too few fields":          {header + "j1,0,10,1\n", 2, "want 5 fields"},
		"a row with too many fields":         {header + "j1,0,10,1,q,x\n", 2, "got 6"},
		"a submit time that is not a number": {header + "j1,0,10,1,q\nj2,soon,10,1,q\n", 3, `submit_seconds: want a number of seconds, got "soon"`},
		"a negative duration":                {header + "j1,0,-1,1,q\n", 2, `duration_seconds: "-1" is out of range`},
		"an infinite duration":               {header + "j1,0,Inf,1,q\n", 2, "duration_seconds: want a number"},
		"a fractional gpu count over one":    {header + "j1,0,1,1.5,q\n", 2, "gpus: more than 1 GPU must be a whole number"},
		"a negative gpu count":               {header + "j1,0,1,-1,q\n", 2, "gpus: must not be negative"},
		"an empty job id":                    {header + ",0,1,1,q\n", 2, "job_id is empty"},
		"an empty queue":                     {header + "j1,0,1,1, \n", 2, "queue is empty"},
		"a duplicate job id":                 {header + "j1,0,1,1,q\nj2,0,1,1,q\nj1,0,1,1,q\n", 4, `duplicate job_id "j1" (first on line 2)`},
		"a gpu count that is not a number":   {header + "j1,0,1,all,q\n", 2, `gpus: want a number, got "all"`},
		"a broken quote in the header":       {"\"job_id,x\n", 1, "malformed CSV"},
		"a broken quote":                     {header + "j1,0,1,1,q\n\"j2,0,1,1,q\n", 3, "malformed CSV"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, "x.csv", tc.content)
			_, err := ReadTrace(path)
			assertFileError(t, err, path, tc.line, tc.phrase)
		})
	}
}

func TestReadTraceMissingFile(t *testing.T) {
	if _, err := ReadTrace(filepath.Join(t.TempDir(), "absent.csv")); !os.IsNotExist(err) {
		t.Errorf("ReadTrace(absent) = %v, want a not-exist error", err)
	}
}
