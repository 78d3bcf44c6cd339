package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/runner"
)

// followPoll is how often a followed log is read again after its end.
const followPoll = 200 * time.Millisecond

// logChunk is the most output sent in one message.
const logChunk = 32 << 10

// logServer is the agent's NodeAgentService: pod output from the log files
// the local runner keeps in each pod's directory (they stay after the pod
// ends, so the output of finished and preempted pods can still be read),
// or (Kubernetes mode) the kubelet's.
type logServer struct {
	nodemanagerv1.UnimplementedNodeAgentServiceServer
	client *clientv3.Client
	// find is the log file of pod index of workload w; path "" when the
	// node has none.
	find func(w *workloadv1.Workload, index int) logFile
}

// logFile is one pod's log.
type logFile struct {
	path  string
	alive func() bool // whether the pod still runs: a followed log ends when it stops
	cri   bool        // the kubelet's CRI lines, served as the text the container wrote
}

// runnerLogs finds the logs the runner keeps.
func runnerLogs(r runner.Runner, running *runningPods) func(*workloadv1.Workload, int) logFile {
	return func(w *workloadv1.Workload, index int) logFile {
		id := podID(w.GetUid(), index)
		return logFile{path: filepath.Join(r.RecordDir(id), runner.LogName), alive: func() bool { return running.has(id) }}
	}
}

// runningPods is the set of pods (by runner id) whose process is alive:
// a followed log ends when its pod does.
type runningPods struct{ m sync.Map }

func (r *runningPods) set(id string, alive bool) {
	if alive {
		r.m.Store(id, struct{}{})
	} else {
		r.m.Delete(id)
	}
}

func (r *runningPods) has(id string) bool { _, ok := r.m.Load(id); return ok }

// podID is the runner id of a pod: "{workload uid}.{index}". Keyed by
// the uid, a workload re-created with the same name never sees the old
// one's directory or log.
func podID(uid string, pod int) string {
	return uid + "." + strconv.Itoa(pod)
}

func (s *logServer) ReadPodLogs(req *nodemanagerv1.ReadPodLogsRequest, stream nodemanagerv1.NodeAgentService_ReadPodLogsServer) error {
	project, workload, ok := clusterproto.ParseWorkloadName(req.GetWorkload())
	if !ok {
		return apierr.Invalid(apierr.FieldViolation{Field: "workload", Description: "must be projects/{project}/workloads/{workload}"})
	}
	if req.GetPodIndex() < 0 || req.GetTailLines() < 0 {
		return apierr.Invalid(apierr.FieldViolation{Field: "pod_index", Description: "must not be negative"})
	}
	noLogs := apierr.FailedPrecondition(commonv1.ErrorReason_WORKLOAD_NO_LOGS, req.GetWorkload(),
		fmt.Sprintf("Pod %d of %s has no output on this node.", req.GetPodIndex(), req.GetWorkload()))
	w, err := etcdstore.NewCollection(s.client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) }).
		Get(stream.Context(), project+"/"+workload)
	if errors.Is(err, etcdstore.ErrNotFound) || (err == nil && !validUID(w.Msg.GetUid())) {
		return noLogs
	}
	if err != nil {
		return fmt.Errorf("read workload %s: %w", req.GetWorkload(), err)
	}
	id := podID(w.Msg.GetUid(), int(req.GetPodIndex()))
	lf := s.find(w.Msg, int(req.GetPodIndex()))
	if lf.path == "" {
		return noLogs
	}
	f, err := os.Open(lf.path)
	if errors.Is(err, os.ErrNotExist) {
		return noLogs
	}
	if err != nil {
		return fmt.Errorf("open pod %s's log: %w", id, err)
	}
	defer f.Close()
	if n := req.GetTailLines(); n > 0 {
		off, err := tailOffset(f, int(n))
		if err != nil {
			return fmt.Errorf("read pod %s's log: %w", id, err)
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return fmt.Errorf("read pod %s's log: %w", id, err)
		}
	}
	var text criText
	send := func(b []byte) error {
		if lf.cri {
			if b = text.decode(b); len(b) == 0 {
				return nil
			}
		}
		return stream.Send(&nodemanagerv1.ReadPodLogsResponse{Data: bytes.Clone(b)})
	}
	buf := make([]byte, logChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if err := send(buf[:n]); err != nil {
				return err
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read pod %s's log: %w", id, err)
		}
		// At the end: done, unless following a pod that still runs (its
		// last words are read on the next pass after it stops).
		if !req.GetFollow() {
			return nil
		}
		alive := lf.alive()
		select {
		case <-stream.Context().Done():
			return nil
		case <-time.After(followPoll):
		}
		if !alive {
			if n, _ := f.Read(buf); n > 0 {
				if err := send(buf[:n]); err != nil {
					return err
				}
				continue
			}
			return nil
		}
	}
}

// criText turns the kubelet's CRI log lines ("<time> <stream> <F|P>
// <text>") back into the text the container wrote (a P line is a part
// that the next line continues), across reads that split lines.
type criText struct{ rest []byte }

// maxCRILine bounds a line held across reads; the kubelet writes at most
// 16 KiB of text per line, so a longer one is not its and goes as is.
const maxCRILine = 64 << 10

func (c *criText) decode(b []byte) []byte {
	b = append(c.rest, b...)
	var out []byte
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		f := bytes.SplitN(b[:i], []byte(" "), 4)
		cri := len(f) >= 3 && (string(f[1]) == "stdout" || string(f[1]) == "stderr") &&
			(string(f[2]) == "F" || string(f[2]) == "P")
		switch {
		case !cri:
			out = append(out, b[:i+1]...)
		default:
			if len(f) == 4 {
				out = append(out, f[3]...)
			}
			if string(f[2]) == "F" {
				out = append(out, '\n')
			}
		}
		b = b[i+1:]
	}
	if len(b) > maxCRILine {
		out, b = append(out, b...), nil
	}
	c.rest = append(c.rest[:0:0], b...)
	return out
}

// tailOffset is where the last n lines of f begin (a final line without a
// newline counts as a line).
func tailOffset(f *os.File, n int) (int64, error) {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 64<<10)
	pos, newlines := end, 0
	for pos > 0 {
		size := min(int64(len(buf)), pos)
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil {
			return 0, err
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+i == end-1 {
				continue
			}
			if newlines++; newlines == n {
				return pos + i + 1, nil
			}
		}
	}
	return 0, nil
}

// validUID reports whether a workload uid can name a directory.
func validUID(uid string) bool {
	return uid != "" && len(uid) <= 64 && strings.Trim(uid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == ""
}
