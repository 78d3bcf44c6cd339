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
	"github.com/runwayhq/runway/pkg/s3sync"
)

// podData is what a pod's data sources need from its workload: the
// definitions resolved at submit and the git tokens opened for it.
type podData struct {
	sources []*workloadv1.DataSourceMount
	tokens  map[int32]*workloadv1.GitToken
	s3Keys  map[int32]*workloadv1.S3Keys
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
			dir, n, err := d.download(ctx, rec, rev, i)
			if err != nil {
				return nil, "", fmt.Errorf("data source at %s: %w", s.GetMountPath(), err)
			}
			mt.HostPath, mt.Owned = dir, true
			said = append(said, fmt.Sprintf("synced %s objects of s3://%s/%s into %s", n, s.GetS3().GetBucket(), s.GetS3().GetPrefix(), s.GetMountPath()))
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

// clone clones data source i into rec/data/i and returns the commit.
func (d podData) clone(ctx context.Context, rec string, rev int64, i int, g *workloadv1.GitSource) (string, string, error) {
	return once(rec, rev, i, func(dir string) (string, error) {
		var auth *gitclone.Auth
		if t := d.tokens[int32(i)]; t != nil {
			auth = &gitclone.Auth{Username: t.GetUsername(), Token: t.GetToken()}
		}
		return gitclone.Clone(ctx, dir, g.GetRepository(), g.GetRevision(), auth)
	})
}

// once makes data source i's directory rec/data/i with fill, which says
// what it holds (a commit, a count), or finds the one made for the same
// binding revision (rec/data/i.made: "REV WHAT"): a pod adopted or
// started again keeps its data.
func once(rec string, rev int64, i int, fill func(dir string) (string, error)) (string, string, error) {
	base := filepath.Join(rec, dataDir)
	dir, marker := filepath.Join(base, strconv.Itoa(i)), filepath.Join(base, strconv.Itoa(i)+".made")
	if b, err := os.ReadFile(marker); err == nil {
		if r, what, ok := strings.Cut(string(b), " "); ok && r == strconv.FormatInt(rev, 10) {
			return dir, what, nil
		}
	}
	if err := errors.Join(os.MkdirAll(base, 0o700), os.RemoveAll(dir), os.Remove(marker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", "", err
	}
	what, err := fill(dir)
	if err != nil {
		return "", "", err
	}
	return dir, what, os.WriteFile(marker, []byte(strconv.FormatInt(rev, 10)+" "+what), 0o600)
}

// s3Source is data source i's bucket prefix with its keys.
func (d podData) s3Source(i int) s3sync.Source {
	s := d.sources[i].GetSource().GetS3()
	src := s3sync.Source{Endpoint: s.GetEndpoint(), Bucket: s.GetBucket(), Prefix: s.GetPrefix()}
	if k := d.s3Keys[int32(i)]; k != nil {
		src.AccessKeyID, src.SecretAccessKey = k.GetAccessKeyId(), k.GetSecretAccessKey()
	}
	return src
}

// download syncs s3 data source i into rec/data/i and returns how many
// objects it holds.
func (d podData) download(ctx context.Context, rec string, rev int64, i int) (string, string, error) {
	return once(rec, rev, i, func(dir string) (string, error) {
		n, err := s3sync.Download(ctx, d.s3Source(i), dir)
		return strconv.Itoa(n), err
	})
}

// upload syncs every read-write s3 data source's directory back to its
// bucket, after the pod exited 0.
func (d podData) upload(ctx context.Context, rec string) error {
	for i, m := range d.sources {
		s := m.GetSource()
		if s.GetS3() == nil || s.GetReadOnly() {
			continue
		}
		if _, err := s3sync.Upload(ctx, d.s3Source(i), filepath.Join(rec, dataDir, strconv.Itoa(i))); err != nil {
			return fmt.Errorf("data source at %s: the pod exited 0, and its files did not reach s3://%s/%s: %w",
				s.GetMountPath(), s.GetS3().GetBucket(), s.GetS3().GetPrefix(), err)
		}
	}
	return nil
}
