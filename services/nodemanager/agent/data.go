package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/gitclone"
	"github.com/runwayhq/runway/pkg/runner"
)

// podData is what a pod's data sources need from its workload: the
// definitions resolved at submit and the git tokens opened for it.
type podData struct {
	sources []*workloadv1.DataSourceMount
	tokens  map[int32]*workloadv1.GitToken
}

// dataDir is where a pod's clones live: its record directory, which no pod
// reaches (the runtime binds each clone at its mount path).
const dataDir = "data"

// mounts turns a pod's data sources into the runner's mounts, cloning each
// git repository into the pod's record directory rec first, once per
// binding revision rev (a pod adopted or started again keeps its clone).
// It returns what the pod's RUNNING report says of the clones (the
// commit each is at: the workload's events record it).
func (d podData) mounts(ctx context.Context, rec string, rev int64) ([]runner.Mount, string, error) {
	var out []runner.Mount
	var said []string
	for i, m := range d.sources {
		s := m.GetSource()
		mt := runner.Mount{Target: s.GetMountPath(), ReadOnly: s.GetReadOnly()}
		switch {
		case s.GetHostPath() != nil:
			mt.HostPath = s.GetHostPath().GetPath()
		case s.GetNfs() != nil:
			mt.NFSServer, mt.NFSPath = s.GetNfs().GetServer(), s.GetNfs().GetPath()
		case s.GetGit() != nil:
			dir, sha, err := d.clone(ctx, rec, rev, i, s.GetGit())
			if err != nil {
				return nil, "", fmt.Errorf("data source at %s: %w", s.GetMountPath(), err)
			}
			mt.HostPath, mt.Owned = dir, true
			said = append(said, fmt.Sprintf("cloned %s at %s into %s", s.GetGit().GetRepository(), sha, s.GetMountPath()))
		case s.GetS3() != nil:
			return nil, "", fmt.Errorf("data source at %s: s3 data sources are not mounted by the node agents' runtimes yet", s.GetMountPath())
		default: // pvc, config-map, secret
			return nil, "", fmt.Errorf("data source at %s: PVC, ConfigMap and Secret data sources are mounted in Kubernetes mode only", s.GetMountPath())
		}
		out = append(out, mt)
	}
	if len(said) == 0 {
		return out, "", nil
	}
	return out, "Data sources: " + strings.Join(said, "; ") + ".", nil
}

// clone clones data source i into rec/data/i, or finds the clone made for
// the same revision (rec/data/i.commit: "REV SHA").
func (d podData) clone(ctx context.Context, rec string, rev int64, i int, g *workloadv1.GitSource) (string, string, error) {
	base := filepath.Join(rec, dataDir)
	dir, marker := filepath.Join(base, strconv.Itoa(i)), filepath.Join(base, strconv.Itoa(i)+".commit")
	if b, err := os.ReadFile(marker); err == nil {
		if r, sha, ok := strings.Cut(string(b), " "); ok && r == strconv.FormatInt(rev, 10) {
			return dir, sha, nil
		}
	}
	if err := errors.Join(os.MkdirAll(base, 0o700), os.RemoveAll(dir), os.Remove(marker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", "", err
	}
	var auth *gitclone.Auth
	if t := d.tokens[int32(i)]; t != nil {
		auth = &gitclone.Auth{Username: t.GetUsername(), Token: t.GetToken()}
	}
	sha, err := gitclone.Clone(ctx, dir, g.GetRepository(), g.GetRevision(), auth)
	if err != nil {
		return "", "", err
	}
	return dir, sha, os.WriteFile(marker, []byte(strconv.FormatInt(rev, 10)+" "+sha), 0o600)
}
