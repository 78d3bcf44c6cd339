package scenario

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkReplayPhilly7d replays the 7-day Philly trace on 110 nodes × 8 GPUs
// with one auto project per user (the replay target: under 30 s).
func BenchmarkReplayPhilly7d(b *testing.B) {
	benchReplay(b, "philly-dirlab-7d.csv", 110, replaySpan())
}

func benchReplay(b *testing.B, trace string, nodes int, span string) {
	path := filepath.Join(sharedDir(b), "traces", trace)
	if _, err := os.Stat(path); err != nil {
		b.Skipf("trace not found: %v", err)
	}
	dir := b.TempDir()
	file := filepath.Join(dir, "replay.yaml")
	doc := "name: replay\nnodes:\n  - {name: n, gpus: 8, count: " + strconv.Itoa(nodes) + "}\nactions:\n" +
		"  - replay: {file: " + path + ", projects: auto}\n  - advance: " + span + "\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		b.Fatal(err)
	}
	sc, err := Load(file)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Output.Metrics.GPUUtilization, "gpu-util")
		b.ReportMetric(res.Output.Metrics.MeanWaitSeconds, "mean-wait-s")
		b.ReportMetric(float64(res.Output.Metrics.Preemptions), "preemptions")
	}
}

func sharedDir(tb testing.TB) string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared"))
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// replaySpan is how long the replay benchmark plays: 7 days, or
// RUNWAY_REPLAY_SPAN (e.g. "2d") for a quicker profile.
func replaySpan() string {
	if s := os.Getenv("RUNWAY_REPLAY_SPAN"); s != "" {
		return s
	}
	return "7d"
}
