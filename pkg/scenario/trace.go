package scenario

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// TraceJob is one row of a job trace: a workload submitted Submit after the
// start of the replay, which completes by itself after running Duration.
type TraceJob struct {
	ID               string
	Submit, Duration time.Duration
	GPUs             float64
	Queue            string
	Line             int // line in the CSV file, for messages
}

// traceHeader is the only column layout accepted; it is checked so that a
// file with columns in another order fails instead of replaying nonsense.
var traceHeader = []string{"job_id", "submit_seconds", "duration_seconds", "gpus", "queue"}

// ReadTrace reads a CSV job trace (job_id,submit_seconds,duration_seconds,
// gpus,queue) and returns its jobs in file order. Errors are *FileError.
func ReadTrace(path string) ([]TraceJob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1 // counted per row below, for a clearer message
	if err := readHeader(path, r); err != nil {
		return nil, err
	}
	return readJobs(path, r)
}

func readHeader(path string, r *csv.Reader) error {
	rec, err := r.Read()
	if errors.Is(err, io.EOF) {
		return &FileError{File: path, Line: 1, Msg: "empty file; want the header " + strings.Join(traceHeader, ",")}
	}
	if err != nil {
		return csvError(path, err)
	}
	line, _ := r.FieldPos(0)
	rec[0] = strings.TrimPrefix(rec[0], "\ufeff") // spreadsheets write a BOM
	if strings.Join(trimAll(rec), ",") != strings.Join(traceHeader, ",") {
		return &FileError{File: path, Line: line, Msg: fmt.Sprintf("header is %q, want %q",
			strings.Join(rec, ","), strings.Join(traceHeader, ","))}
	}
	return nil
}

func readJobs(path string, r *csv.Reader) ([]TraceJob, error) {
	var jobs []TraceJob
	firstLine := map[string]int{} // job ids become workload names, which must be unique
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return jobs, nil
		}
		if err != nil {
			return nil, csvError(path, err)
		}
		line, _ := r.FieldPos(0)
		job, msg := parseJob(trimAll(rec))
		if first, dup := firstLine[job.ID]; msg == "" && dup {
			msg = fmt.Sprintf("duplicate job_id %q (first on line %d)", job.ID, first)
		}
		if msg != "" {
			return nil, &FileError{File: path, Line: line, Msg: msg}
		}
		job.Line = line
		firstLine[job.ID] = line
		jobs = append(jobs, job)
	}
}

// parseJob checks one row; it returns a message instead of an error so the
// caller adds the position once.
func parseJob(rec []string) (TraceJob, string) {
	if len(rec) != len(traceHeader) {
		return TraceJob{}, fmt.Sprintf("want %d fields (%s), got %d",
			len(traceHeader), strings.Join(traceHeader, ","), len(rec))
	}
	job := TraceJob{ID: rec[0], Queue: rec[4]}
	var msgs [3]string
	job.Submit, msgs[0] = seconds(rec[1], "submit_seconds")
	job.Duration, msgs[1] = seconds(rec[2], "duration_seconds")
	job.GPUs, msgs[2] = traceGPUs(rec[3])
	for _, m := range msgs {
		if m != "" {
			return job, m
		}
	}
	switch {
	case job.ID == "":
		return job, "job_id is empty"
	case job.Queue == "":
		return job, "queue is empty"
	}
	return job, ""
}

// seconds parses a non-negative count of seconds, whole or decimal, rounded
// to the nanosecond so that "0.1" is exactly 100ms.
func seconds(s, column string) (time.Duration, string) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Sprintf("%s: want a number of seconds, got %q", column, s)
	}
	if v < 0 || v*float64(time.Second) >= math.MaxInt64 {
		return 0, fmt.Sprintf("%s: %q is out of range", column, s)
	}
	return time.Duration(math.Round(v * float64(time.Second))), ""
}

// traceGPUs applies the submit rule for GPUs: a fraction of one device, or
// whole devices.
func traceGPUs(s string) (float64, string) {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Sprintf("gpus: want a number, got %q", s)
	case v < 0:
		return 0, fmt.Sprintf("gpus: must not be negative, got %s", s)
	case v > 1 && v != math.Trunc(v):
		return 0, fmt.Sprintf("gpus: more than 1 GPU must be a whole number, got %s", s)
	}
	return v, ""
}

func trimAll(rec []string) []string {
	out := make([]string, len(rec))
	for i, f := range rec {
		out[i] = strings.TrimSpace(f)
	}
	return out
}

// csvError locates a syntax error found by encoding/csv.
func csvError(path string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &FileError{File: path, Line: pe.Line, Msg: "malformed CSV: " + pe.Err.Error()}
	}
	return fmt.Errorf("%s: %w", path, err)
}
