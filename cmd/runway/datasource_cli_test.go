package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/runwayhq/runway/pkg/blob/s3test"
	"github.com/runwayhq/runway/pkg/gitclone/gittest"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
)

// workloadEvents is a workload's status message and events' messages,
// from `workload describe -o json`.
func workloadEvents(t *testing.T, s *session, workload, project string) string {
	t.Helper()
	var w struct {
		Status struct {
			Phase  string
			Events []struct{ Message string }
			Pods   []struct{ Message string }
		}
	}
	if err := json.Unmarshal([]byte(s.ok(t, "", "workload", "describe", workload, "-p", project, "-o", "json")), &w); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range w.Status.Events {
		out = append(out, e.Message)
	}
	for _, p := range w.Status.Pods {
		out = append(out, "pod: "+p.Message)
	}
	return strings.Join(out, "\n")
}

// Through `runway dev` with the container runtime (podman): a host-path
// data source and a one-off --host-path are seen read-only at their mount
// paths (the pod prints a file and fails writing); git data sources are
// cloned at the revision asked for from git's own http-backend, a private
// one with a git credential (the commit is in the events; without the
// credential the pod fails saying why); a missing node directory fails
// the pod with the reason in its status; an s3 data source (the Versity
// gateway) is synced in and, read-write, back after the clean exit. A
// researcher may neither create
// a data source nor submit a one-off host path.
func TestCLI_DataSourcesInContainers(t *testing.T) {
	e := podmantest.Start(t)
	d := startDevAt(t, t.TempDir(), []string{"DOCKER_HOST=" + e.Host}, "--runtime", "container")
	admin := d.session(t, d.token)
	admin.ok(t, "", "project", "create", "team-a", "--gpu", "2")
	img := podmantest.Image

	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "hello.txt"), []byte("dataset-content-42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(host, 0o755); err != nil {
		t.Fatal(err)
	}
	admin.ok(t, "", "datasource", "create", "host-path", "datasets", "-p", "team-a", "--mount", "/data", "--path", host, "--read-only")
	if out := admin.ok(t, "", "datasource", "list", "-p", "team-a"); !strings.Contains(out, "projects/team-a/dataSources/datasets") || !strings.Contains(out, host) {
		t.Errorf("datasource list:\n%s", out)
	}
	if out := admin.ok(t, "", "datasource", "describe", "datasets", "-p", "team-a"); !strings.Contains(out, "Read-only:   true") || !strings.Contains(out, "host-path") {
		t.Errorf("datasource describe:\n%s", out)
	}
	readAndWrite := "cat %[1]s/hello.txt; if echo x > %[1]s/new; then echo WROTE; exit 0; fi; exit 3"
	admin.ok(t, "", "training", "submit", "named", "-p", "team-a", "-i", img, "--data-source", "datasets", "--", "sh", "-c", strings.ReplaceAll(readAndWrite, "%[1]s", "/data"))
	admin.ok(t, "", "training", "submit", "oneoff", "-p", "team-a", "-i", img, "--host-path", "path="+host+",mount=/one,readonly",
		"--", "sh", "-c", strings.ReplaceAll(readAndWrite, "%[1]s", "/one"))
	for _, w := range []string{"named", "oneoff"} {
		waitPhase(t, admin, w, "team-a", "WORKLOAD_PHASE_FAILED")
		logs := admin.ok(t, "", "workload", "logs", w, "-p", "team-a")
		if !strings.Contains(logs, "dataset-content-42") || !strings.Contains(logs, "Read-only file system") || strings.Contains(logs, "WROTE") {
			t.Errorf("%s's logs:\n%s", w, logs)
		}
	}
	if _, err := os.Stat(filepath.Join(host, "new")); err == nil {
		t.Error("a pod wrote into the read-only node directory")
	}

	// Git: a public repository at an older commit, a private one with a
	// credential.
	public := gittest.Serve(t, "", "")
	url, shas := public.Repo(t, "code", map[string]string{"v.txt": "first\n"}, map[string]string{"v.txt": "second\n"})
	admin.ok(t, "", "datasource", "create", "git", "code", "-p", "team-a", "--mount", "/src", "--repository", url, "--revision", shas[0])
	admin.ok(t, "", "training", "submit", "cloned", "-p", "team-a", "-i", img, "--data-source", "code", "--", "cat", "/src/v.txt")
	const token = "git-token-5be1d0a4"
	private := gittest.Serve(t, "bot", token)
	purl, pshas := private.Repo(t, "secret", map[string]string{"p.txt": "private-content\n"})
	admin.ok(t, token, "credential", "create", "git", "gh", "-p", "team-a", "--username", "bot", "--token-file", "-")
	admin.ok(t, "", "datasource", "create", "git", "private", "-p", "team-a", "--mount", "/p", "--repository", purl, "--revision", "main", "--credential", "gh")
	admin.ok(t, "", "training", "submit", "private", "-p", "team-a", "-i", img, "--data-source", "private", "--", "cat", "/p/p.txt")
	admin.ok(t, "", "training", "submit", "nocred", "-p", "team-a", "-i", img, "--git", "repository="+purl+",revision=main,mount=/p", "--", "cat", "/p/p.txt")
	admin.ok(t, "", "training", "submit", "nodir", "-p", "team-a", "-i", img, "--host-path", "path=/no/such/dir,mount=/x", "--", "true")

	waitPhase(t, admin, "cloned", "team-a", "WORKLOAD_PHASE_COMPLETED")
	if logs := admin.ok(t, "", "workload", "logs", "cloned", "-p", "team-a"); logs != "first\n" {
		t.Errorf("the clone at %s printed %q, want the first commit's file", shas[0], logs)
	}
	if desc := admin.ok(t, "", "workload", "describe", "cloned", "-p", "team-a"); !strings.Contains(desc, "projects/team-a/dataSources/code (git "+url+"@"+shas[0]+")") {
		t.Errorf("cloned's description does not list its data source:\n%s", desc)
	}
	if ev := workloadEvents(t, admin, "cloned", "team-a"); !strings.Contains(ev, "cloned "+url+" at "+shas[0]+" into /src") {
		t.Errorf("cloned's events do not record the commit %s:\n%s", shas[0], ev)
	}
	waitPhase(t, admin, "private", "team-a", "WORKLOAD_PHASE_COMPLETED")
	if logs := admin.ok(t, "", "workload", "logs", "private", "-p", "team-a"); logs != "private-content\n" {
		t.Errorf("the private clone printed %q", logs)
	}
	if ev := workloadEvents(t, admin, "private", "team-a"); !strings.Contains(ev, pshas[0]) || strings.Contains(ev, token) {
		t.Errorf("private's events:\n%s", ev)
	}
	for w, reason := range map[string]string{"nocred": "clone " + purl, "nodir": "the node has no directory /no/such/dir"} {
		waitPhase(t, admin, w, "team-a", "WORKLOAD_PHASE_FAILED")
		if ev := workloadEvents(t, admin, w, "team-a"); !strings.Contains(ev, reason) {
			t.Errorf("%s's events and status do not say %q:\n%s", w, reason, ev)
		}
	}

	// S3: synced in before the start, written back after a clean exit.
	s3 := s3test.StartHTTP(t)
	bucket, err := minio.New(strings.TrimPrefix(s3.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.PutObject(t.Context(), s3.Bucket, "train/in.txt", strings.NewReader("from-the-bucket\n"), 16, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	admin.ok(t, s3.SecretKey, "credential", "create", "s3-keys", "keys", "-p", "team-a", "--access-key-id", s3.AccessKey, "--secret-file", "-")
	admin.ok(t, "", "datasource", "create", "s3", "bucket", "-p", "team-a", "--mount", "/s3", "--endpoint", s3.Endpoint,
		"--bucket", s3.Bucket, "--prefix", "train/", "--credential", "keys")
	admin.ok(t, "", "training", "submit", "synced", "-p", "team-a", "-i", img, "--data-source", "bucket", "--",
		"sh", "-c", "cat /s3/in.txt && echo written-by-the-pod > /s3/out.txt")
	waitPhase(t, admin, "synced", "team-a", "WORKLOAD_PHASE_COMPLETED")
	if logs := admin.ok(t, "", "workload", "logs", "synced", "-p", "team-a"); logs != "from-the-bucket\n" {
		t.Errorf("the s3 workload printed %q", logs)
	}
	if ev := workloadEvents(t, admin, "synced", "team-a"); !strings.Contains(ev, "synced 1 objects of s3://"+s3.Bucket+"/train/ into /s3") {
		t.Errorf("synced's events:\n%s", ev)
	}
	obj, err := bucket.GetObject(t.Context(), s3.Bucket, "train/out.txt", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(obj); string(b) != "written-by-the-pod\n" {
		t.Errorf("train/out.txt in the bucket: %q", b)
	}

	alice := researcher(t, d, "alice", "team-a")
	for _, args := range [][]string{
		{"datasource", "create", "nfs", "mine", "-p", "team-a", "--mount", "/m", "--nfs-server", "nfs", "--path", "/x"},
		{"training", "submit", "escape", "-p", "team-a", "-i", img, "--host-path", "path=/,mount=/host", "--", "true"},
	} {
		r := alice.run(t, "", args...)
		if r.code == 0 || !strings.Contains(r.stderr, "ermission") {
			t.Errorf("alice: runway %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// Her project's data source is hers to use.
	alice.ok(t, "", "training", "submit", "uses", "-p", "team-a", "-i", img, "--data-source", "datasets", "--", "cat", "/data/hello.txt")
	waitPhase(t, alice, "uses", "team-a", "WORKLOAD_PHASE_COMPLETED")

	// Deleted: a submit naming it is refused; a workload submitted with
	// it keeps its copy.
	admin.ok(t, "", "datasource", "delete", "code", "-p", "team-a")
	if r := admin.run(t, "", "training", "submit", "gone", "-p", "team-a", "-i", img, "--data-source", "code", "--", "true"); r.code == 0 ||
		!strings.Contains(r.stderr, "DATA_SOURCE_NOT_FOUND") {
		t.Errorf("a submit naming a deleted data source: exit %d\n%s", r.code, r.stderr)
	}
	if desc := admin.ok(t, "", "workload", "describe", "cloned", "-p", "team-a"); !strings.Contains(desc, url+"@"+shas[0]) {
		t.Errorf("cloned lost its data source with the delete:\n%s", desc)
	}
}
