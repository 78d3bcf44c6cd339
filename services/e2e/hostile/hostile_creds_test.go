//go:build linux

package hostile

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
	"github.com/runwayhq/runway/pkg/runner/local"
)

// credsPodUID is a uid of the agents' pod range that no running pod of
// these tests holds: the control searches run as it, as a pod would
// without the agent's mount namespace.
var credsPodUID = &syscall.Credential{Uid: local.DefaultUIDs.Last, Gid: local.DefaultUIDs.Last, Groups: []uint32{}}

// credsControl runs the searcher on the host as a pod's uid would run
// without the pods' mount namespace, and returns what it found: proof that
// the search finds what is readable, so that an empty search in a pod
// means the pod could not read it.
func credsControl(t *testing.T, args []string) credsFindings {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credsPodUID}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("control search: %v\n%s", err, out)
	}
	f := credsParse(string(out))
	if !f.done || f.visited < 10000 || f.files == 0 {
		t.Fatalf("control search did not finish or visited almost nothing (%d entries, %d files read):\n%s", f.visited, f.files, out)
	}
	return f
}

// credsPodSearch is the search a pod printed; it fails unless the search
// walked its whole view (a pod that saw nothing proves nothing).
func credsPodSearch(t *testing.T, log string, minVisited int) credsFindings {
	t.Helper()
	f := credsParse(log)
	if !f.done || f.visited < minVisited || f.files == 0 {
		t.Fatalf("the pod's search did not finish or visited under %d entries (%d, %d files read):\n%s", minVisited, f.visited, f.files, log)
	}
	t.Logf("the pod's search visited %d entries and read %d files changed since the test began", f.visited, f.files)
	return f
}

// credsPodLog is the output of the one pod the agent with dataDir ran.
func credsPodLog(t *testing.T, dataDir string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dataDir, "*", local.LogName))
	if len(logs) != 1 {
		t.Fatalf("pod logs under %s: %v, want one", dataDir, logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// credsSigningKeys are the token signing keys in etcd.
func credsSigningKeys(t *testing.T, cli *clientv3.Client) []credsSecret {
	t.Helper()
	r, err := cli.Get(t.Context(), etcdstore.PrefixSigningKeys, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []credsSecret
	for _, kv := range r.Kvs {
		var k identityv1.SigningKey
		if err := proto.Unmarshal(kv.Value, &k); err != nil {
			t.Fatal(err)
		}
		out = append(out, credsSecret{"signing-key " + k.GetId(), k.GetSecret()})
	}
	if len(out) == 0 {
		t.Fatal("no signing key in etcd")
	}
	return out
}

// A researcher's pod on an agent running pods as processes (as root, the
// chart's local mode) hunts for the agent's credentials in its whole view:
// the etcd client key and the agent's TLS key, both left 0644 in
// directories anyone may cross (the chart's old mounts), the token
// signing keys and the administrator's token. The same search run as a
// pod's uid outside the pods' mount namespace finds both keys; the pod
// finds nothing, and opens none of the credentials' paths.
func TestHostileCredsProcessPodFindsNoAgentKey(t *testing.T) {
	credsSince(t) // before any secret exists
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): the process runtime gives pods their own uids only as root")
	}
	base := credsOpenDir(t)
	private := filepath.Join(base, "etcd-server")
	etc := filepath.Join(base, "etc-runway") // the chart's /etc/runway: --hide-from-pods
	etcdTLS := filepath.Join(etc, "etcd")
	listenTLS := filepath.Join(base, "agent-tls") // hidden because --tls-key-file names it
	for _, d := range []string{etc, etcdTLS, listenTLS} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	// One CA for etcd's server and its clients; the agent's files are
	// written 0644, as the chart's old mounts were.
	ca := newCredsCA(t)
	ca.issue(t, private, "etcd", 0o600)
	etcdKey := ca.issue(t, etcdTLS, "client", 0o644)
	agentKey := ca.issue(t, listenTLS, "agent", 0o644)
	etcdURL, etcdProc := credsStartEtcdTLS(t, filepath.Join(base, "etcd-data"), private)
	etcdFlags := []string{"--etcd-endpoints", etcdURL, "--etcd-ca-file", filepath.Join(etcdTLS, "ca.crt"),
		"--etcd-cert-file", filepath.Join(etcdTLS, "client.crt"), "--etcd-key-file", filepath.Join(etcdTLS, "client.key")}
	cp := credsStartControlPlane(t, etcdFlags, etcdProc)
	dataDir := filepath.Join(base, "agent-data")
	agent := credsStart(t, "runway agent", nil, nil, credsRunway(t), append([]string{"agent", "--runtime", "process",
		"--node", "node-1", "--gpus", "2", "--gpu-backend", "simulated", "--data-dir", dataDir,
		"--listen", "127.0.0.1:0", "--tls-cert-file", filepath.Join(listenTLS, "agent.crt"),
		"--tls-key-file", filepath.Join(listenTLS, "agent.key"), "--hide-from-pods", etc}, etcdFlags...)...)
	procs := append(cp.procs, agent)

	cli := credsEtcdClient(t, etcdURL, etcdTLS)
	secrets := append([]credsSecret{
		{"etcd-client-key", credsPEMBody(etcdKey)},
		{"agent-tls-key", credsPEMBody(agentKey)},
		{"admin-token", []byte(cp.token)},
	}, credsSigningKeys(t, cli)...)
	args := credsSearchArgs(t, credsSearcher(t), secrets, filepath.Join(etcdTLS, "client.key"),
		filepath.Join(listenTLS, "agent.key"), dataDir)

	control := credsControl(t, args)
	for _, want := range []string{"FOUND etcd-client-key " + filepath.Join(etcdTLS, "client.key"),
		"FOUND agent-tls-key " + filepath.Join(listenTLS, "agent.key")} {
		if !strings.Contains(strings.Join(control.found, "\n"), want) {
			t.Fatalf("control search without the pods' namespace: want %q among %v", want, control.found)
		}
	}

	credsProject(t, cp.conns["quota"], "team-a", 2)
	if err := credsSubmit(cp.conn, t.Context(), "team-a", "thief", "", args...); err != nil {
		t.Fatal(err)
	}
	credsWaitCompleted(t, cp.conn, procs, "team-a", "thief", 3*time.Minute)
	f := credsPodSearch(t, credsPodLog(t, dataDir), control.visited/2)
	if len(f.found) > 0 || len(f.opened) > 0 {
		t.Errorf("the pod reached the agent's credentials:\n%s\n%s", strings.Join(f.found, "\n"), strings.Join(f.opened, "\n"))
	}
}

// `runway dev` as root with the process runtime: a pod hunts for the
// administrator's token and the signing keys. DATA-DIR/env is made
// world-readable (as a careless chmod or umask would), so that only the
// pods' mount namespace stands between it and the pod: the control search
// finds the token there, the pod finds nothing anywhere.
func TestHostileCredsDevProcessPodFindsNoToken(t *testing.T) {
	credsSince(t) // before any secret exists
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): runway dev gives pods their own uids only as root")
	}
	d := credsStartDev(t, nil, nil, "--runtime", "process")
	env := filepath.Join(d.dataDir, "env")
	for p, mode := range map[string]os.FileMode{d.dataDir: 0o755, env: 0o644} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(d.dataDir, "etcd", "client.sock")},
		DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	secrets := append([]credsSecret{{"admin-token", []byte(d.token)}}, credsSigningKeys(t, cli)...)
	args := credsSearchArgs(t, credsSearcher(t), secrets, env, filepath.Join(d.dataDir, "etcd"))
	control := credsControl(t, args)
	if !strings.Contains(strings.Join(control.found, "\n"), "FOUND admin-token "+env) {
		t.Fatalf("control search: want the token in the world-readable %s, found %v", env, control.found)
	}
	credsProject(t, d.conn, "team-a", 2)
	if err := credsSubmit(d.conn, t.Context(), "team-a", "thief", "", args...); err != nil {
		t.Fatal(err)
	}
	credsWaitCompleted(t, d.conn, []*credsProc{d.proc}, "team-a", "thief", 3*time.Minute)
	f := credsPodSearch(t, credsLogs(t, d.conn, "team-a", "thief"), control.visited/2)
	if len(f.found) > 0 || len(f.opened) > 0 {
		t.Errorf("the pod reached runway dev's credentials:\n%s\n%s", strings.Join(f.found, "\n"), strings.Join(f.opened, "\n"))
	}
}

// `runway dev` with the container runtime (podman): a pod of an image
// holding only the searcher hunts for the administrator's token, the
// signing keys and any PEM private key in its whole view, and finds none.
func TestHostileCredsContainerPodFindsNoKey(t *testing.T) {
	credsSince(t) // before any secret exists
	eng := podmantest.Start(t)
	const image = "localhost/runway-credsearch:test"
	credsImportImage(t, eng.Host, image, credsSearcher(t))
	d := credsStartDev(t, nil, []string{"DOCKER_HOST=" + eng.Host}, "--runtime", "container")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(d.dataDir, "etcd", "client.sock")},
		DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	secrets := append([]credsSecret{{"admin-token", []byte(d.token)}, {"pem-private-key", []byte("PRIVATE KEY-----")}},
		credsSigningKeys(t, cli)...)
	args := credsSearchArgs(t, "/credsearch", secrets, filepath.Join(d.dataDir, "env"), filepath.Join(d.dataDir, "etcd"))
	credsProject(t, d.conn, "team-a", 2)
	if err := credsSubmit(d.conn, t.Context(), "team-a", "thief", image, args...); err != nil {
		t.Fatal(err)
	}
	credsWaitCompleted(t, d.conn, []*credsProc{d.proc}, "team-a", "thief", 3*time.Minute)
	// The image is one file: the search must at least have read it.
	f := credsPodSearch(t, credsLogs(t, d.conn, "team-a", "thief"), 1)
	if len(f.found) > 0 || len(f.opened) > 0 {
		t.Errorf("the container reached credentials:\n%s\n%s", strings.Join(f.found, "\n"), strings.Join(f.opened, "\n"))
	}
}

// credsImportImage imports an image of one file, bin as /credsearch.
func credsImportImage(t *testing.T, host, ref, bin string) {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"proc/", "sys/", "dev/", "tmp/", "etc/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "credsearch", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	r, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	defer r.Close()
	if _, err := bytes.NewBuffer(nil).ReadFrom(r); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
}

// credsEtcdClient connects to the TLS etcd with the client files in dir.
func credsEtcdClient(t *testing.T, url, dir string) *clientv3.Client {
	t.Helper()
	return credsEtcdClientAs(t, url, dir, "client")
}

// credsEtcdClientAs is an etcd client with the certificate NAME.crt in dir
// (etcd's user NAME once its auth is on).
func credsEtcdClientAs(t *testing.T, url, dir, name string) *clientv3.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// The chart, rendered with every secret the agent can mount (etcd's
// client certificate, the services' TLS, the metrics token): in local mode
// the agent's container runs tenants' pods as processes, so each Secret it
// mounts must be readable by its owner alone (0400: root, the agent's
// user, since no fsGroup gives it away), every pod must run as a uid of its
// own (not the agent's), each mount must lie under a --hide-from-pods path
// (covered in every pod's mount namespace), and no Secret may reach the
// agent's environment. In Kubernetes mode the kubelet runs the pods in
// pods of their own; the agent's Secrets are held to 0400 all the same.
func TestHostileCredsChartNoSecretPodsCanRead(t *testing.T) {
	helm := filepath.Join(credsRoot(t), "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("helm %s is missing (%v): run `make helm`", helm, err)
	}
	common := []string{"--set", "agent.enabled=true", "--set", "tls.enabled=true", "--set", "etcd.tls.enabled=true"}
	for name, args := range map[string][]string{
		"local mode":      append([]string{"--set", "scheduler.runtime=local"}, common...),
		"Kubernetes mode": common,
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(helm, append([]string{"template", "rw", filepath.Join(credsRoot(t), "deploy", "runway"),
				"--namespace", "runway-system"}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			agents := 0
			for _, pod := range credsPodTemplates(t, out) {
				for _, c := range pod.Spec.Containers {
					if len(c.Args) == 0 || c.Args[0] != "agent" {
						continue
					}
					agents++
					for _, problem := range credsChartProblems(pod.Spec, c) {
						t.Errorf("%s, container %s: %s", pod.Name, c.Name, problem)
					}
				}
			}
			if agents != 1 {
				t.Fatalf("rendered %d agent containers, want 1", agents)
			}
		})
	}
}

// credsPodTemplate is a workload's pod template, named by its workload.
type credsPodTemplate struct {
	Name string
	Spec corev1.PodSpec
}

// credsPodTemplates are the pod templates of the DaemonSets, Deployments
// and StatefulSets in a rendered chart.
func credsPodTemplates(t *testing.T, rendered []byte) []credsPodTemplate {
	t.Helper()
	var out []credsPodTemplate
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Template *corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode the rendered chart: %v", err)
		}
		switch obj.Kind {
		case "DaemonSet", "Deployment", "StatefulSet":
			out = append(out, credsPodTemplate{Name: obj.Kind + "/" + obj.Metadata.Name, Spec: obj.Spec.Template.Spec})
		}
	}
}

// credsChartProblems says how a tenant's pod could read a credential of
// container c (an agent) of pod.
func credsChartProblems(pod corev1.PodSpec, c corev1.Container) []string {
	var problems []string
	kube := slices.Contains(c.Args, "--runtime=kubernetes")
	var hidden []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--hide-from-pods="); ok {
			hidden = append(hidden, strings.Split(v, ",")...)
		}
		if a == "--pod-uids=" || strings.HasPrefix(a, "--run-as-user=") {
			problems = append(problems, "pods do not get uids of their own ("+a+"): they could share the agent's or each other's")
		}
	}
	uid := int64(-1)
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = *sc.RunAsUser
	} else if psc := pod.SecurityContext; psc != nil && psc.RunAsUser != nil {
		uid = *psc.RunAsUser
	}
	if !kube && uid != 0 {
		problems = append(problems, fmt.Sprintf("runs as uid %d, want 0 stated: the Secrets' owner and the one user pods never run as", uid))
	}
	if psc := pod.SecurityContext; psc != nil && psc.FSGroup != nil {
		problems = append(problems, fmt.Sprintf("fsGroup %d: the Secrets' files are given to that group", *psc.FSGroup))
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			problems = append(problems, "env "+e.Name+" comes from a Secret")
		}
	}
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			problems = append(problems, "envFrom Secret "+e.SecretRef.Name)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v := vols[m.Name]
		var modes []int32
		switch {
		case v.Secret != nil:
			modes = credsSecretModes(v.Secret.DefaultMode, v.Secret.Items)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					modes = append(modes, credsSecretModes(v.Projected.DefaultMode, src.Secret.Items)...)
				}
			}
		default:
			continue
		}
		for _, mode := range modes {
			if mode&0o077 != 0 {
				problems = append(problems, fmt.Sprintf("Secret volume %s at %s has mode %#o: readable beyond its owner", m.Name, m.MountPath, mode))
			}
		}
		if !kube && !slices.ContainsFunc(hidden, func(h string) bool {
			return m.MountPath == h || strings.HasPrefix(m.MountPath, strings.TrimSuffix(h, "/")+"/")
		}) {
			problems = append(problems, fmt.Sprintf("Secret volume %s at %s is under no --hide-from-pods path (%v): pods' mount namespaces would show it", m.Name, m.MountPath, hidden))
		}
	}
	return problems
}

// credsSecretModes are the file modes a Secret volume gives its files:
// each item's, else the default (Kubernetes' is 0644).
func credsSecretModes(defaultMode *int32, items []corev1.KeyToPath) []int32 {
	mode := int32(0o644)
	if defaultMode != nil {
		mode = *defaultMode
	}
	out := []int32{mode}
	for _, it := range items {
		if it.Mode != nil {
			out = append(out, *it.Mode)
		}
	}
	return out
}
