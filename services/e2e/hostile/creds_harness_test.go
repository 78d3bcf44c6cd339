//go:build linux

// Package hostile is the hostile-tenant suite: each case a real attempt of
// a tenant's workload (or an API caller) through real processes, which
// must fail, and fail for the right reason.
//
// This file is the harness of the credential and process-runtime cases
// (hostile_creds_test.go, hostile_process_test.go); its names start with
// creds so that the other cases' harnesses never collide with them.
package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// credsRoot is the module root.
func credsRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// credsBuilt builds each binary once per test process, into a directory
// anyone may read (the searcher runs as pods' uids).
var credsBuilt struct {
	sync.Mutex
	dir  string
	bins map[string]string
}

// credsBuild builds pkg as name (static when asked: the searcher runs in
// an image of one file) and returns its path.
func credsBuild(t *testing.T, name, pkg string, static bool) string {
	t.Helper()
	credsBuilt.Lock()
	defer credsBuilt.Unlock()
	if p, ok := credsBuilt.bins[name]; ok {
		return p
	}
	if credsBuilt.dir == "" {
		dir, err := os.MkdirTemp("", "runway-hostile-creds-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		credsBuilt.dir, credsBuilt.bins = dir, map[string]string{}
	}
	out := filepath.Join(credsBuilt.dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = credsRoot(t)
	if static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	credsBuilt.bins[name] = out
	return out
}

func credsRunway(t *testing.T) string {
	return credsBuild(t, "runway", "github.com/runwayhq/runway/cmd/runway", false)
}

func credsSearcher(t *testing.T) string {
	return credsBuild(t, "credsearch", "./services/e2e/hostile/testdata/credsearch", true)
}

// credsProc is a child process in its own process group.
type credsProc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

func (p *credsProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// credsStart runs bin with args (as cred's user when set); t.Cleanup
// stops it with SIGTERM (it stops its pods), then kills its group.
func credsStart(t *testing.T, name string, cred *syscall.Credential, env []string, bin string, args ...string) *credsProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &credsProc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				t.Errorf("%s did not stop within 20 s of SIGTERM", name)
			}
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("--- %s output (%v):\n%s", name, p.err, out.String())
		}
	})
	return p
}

// credsEventually polls cond every 100 ms until it returns "", failing
// with its last answer after timeout, or at once when one of procs exits.
func credsEventually(t *testing.T, timeout time.Duration, what string, procs []*credsProc, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("waiting for %s: %s exited (%v):\n%s", what, p.name, p.err, p.out.String())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func credsFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// credsToken is a bearer token for a connection.
type credsToken string

func (c credsToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(c)}, nil
}

func (credsToken) RequireTransportSecurity() bool { return false }

// credsDial connects to a plaintext loopback server as token's holder.
func credsDial(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(credsToken(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// credsServing waits until the health service at conn says SERVING.
func credsServing(t *testing.T, p *credsProc, conn *grpc.ClientConn) {
	t.Helper()
	h := healthpb.NewHealthClient(conn)
	credsEventually(t, 60*time.Second, p.name+" serving", []*credsProc{p}, func() string {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err.Error()
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return r.GetStatus().String()
		}
		return ""
	})
}

// credsDev is `runway dev` with one node, as cred's user (root when nil).
type credsDev struct {
	proc    *credsProc
	dataDir string
	addr    string
	token   string // the administrator's, from DATA-DIR/env
	conn    *grpc.ClientConn
}

// credsStartDev starts runway dev with its data in a directory anyone may
// cross (the modes of what runway dev writes are what protect it).
func credsStartDev(t *testing.T, cred *syscall.Credential, env []string, args ...string) *credsDev {
	t.Helper()
	base := credsOpenDir(t)
	dataDir := filepath.Join(base, "dev")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if cred != nil { // its data, and its pods' work directories (under TMPDIR), are its own
		tmp := filepath.Join(base, "tmp")
		if err := os.Mkdir(tmp, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{dataDir, tmp} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
		env = append(env, "TMPDIR="+tmp)
	}
	addr := credsFreeAddr(t)
	p := credsStart(t, "runway dev", cred, env, credsRunway(t), append([]string{"dev", "--data-dir", dataDir, "--listen", addr,
		"--metrics-listen", "none", "--no-history", "--nodes", "1", "--gpus-per-node", "2"}, args...)...)
	d := &credsDev{proc: p, dataDir: dataDir, addr: addr}
	credsEventually(t, 90*time.Second, "runway dev's env file", []*credsProc{p}, func() string {
		b, err := os.ReadFile(filepath.Join(dataDir, "env"))
		if err != nil {
			return err.Error()
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export RUNWAY_TOKEN="); ok {
				d.token = v
			}
		}
		if d.token == "" {
			return "no token yet"
		}
		return ""
	})
	d.conn = credsDial(t, addr, d.token)
	credsServing(t, p, d.conn)
	return d
}

// credsOpenDir is a temporary directory anyone may cross, as its parent
// (t.TempDir's are 0700): what is in it is protected by its own modes and
// the pods' mount namespace alone.
func credsOpenDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// credsProject creates a project with gpus GPUs deserved in the default
// pool.
func credsProject(t *testing.T, conn *grpc.ClientConn, project string, gpus int64) {
	t.Helper()
	deserved := gpus * 1000
	if _, err := quotav1.NewQuotaServiceClient(conn).CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: project,
		Project: &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
			Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}}); err != nil {
		t.Fatalf("CreateProject(%s): %v", project, err)
	}
}

// credsSubmit submits a one-pod training workload of one GPU running
// command (image for the container runtime; the process runtime ignores
// it, "" names a placeholder).
func credsSubmit(conn *grpc.ClientConn, ctx context.Context, project, id, image string, command ...string) error {
	if image == "" {
		image = "quickstart"
	}
	_, err := workloadv1.NewWorkloadServiceClient(conn).CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{
		Parent: "projects/" + project, WorkloadId: id, Workload: &workloadv1.Workload{
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: image, Command: command,
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}})
	return err
}

// credsPhase is the workload's phase.
func credsPhase(t *testing.T, conn *grpc.ClientConn, project, id string) (workloadv1.WorkloadPhase, string) {
	w, err := workloadv1.NewWorkloadServiceClient(conn).GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{
		Name: "projects/" + project + "/workloads/" + id})
	if err != nil {
		return 0, err.Error()
	}
	return w.GetStatus().GetPhase(), ""
}

// credsWaitCompleted waits until the workload has finished, and fails
// unless it COMPLETED (its pod exited 0).
func credsWaitCompleted(t *testing.T, conn *grpc.ClientConn, procs []*credsProc, project, id string, timeout time.Duration) {
	t.Helper()
	var got workloadv1.WorkloadPhase
	credsEventually(t, timeout, id+" finished", procs, func() string {
		var why string
		if got, why = credsPhase(t, conn, project, id); why != "" {
			return why
		}
		switch got {
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED, workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED,
			workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED:
			return ""
		}
		return got.String()
	})
	if got != workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED {
		t.Fatalf("%s: %s, want COMPLETED", id, got)
	}
}

// credsLogs is the whole output of the workload's pod 0.
func credsLogs(t *testing.T, conn *grpc.ClientConn, project, id string) string {
	t.Helper()
	st, err := workloadv1.NewWorkloadServiceClient(conn).ReadWorkloadLogs(t.Context(), &workloadv1.ReadWorkloadLogsRequest{
		Name: "projects/" + project + "/workloads/" + id})
	if err != nil {
		t.Fatalf("ReadWorkloadLogs(%s): %v", id, err)
	}
	var b strings.Builder
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			t.Fatalf("ReadWorkloadLogs(%s): %v", id, err)
		}
		b.Write(r.GetData())
	}
}

// credsSecret is one secret the searcher hunts for.
type credsSecret struct {
	name string
	b    []byte
}

// credsSearchArgs is the searcher's command line for secrets and paths,
// reading the files changed since the test began (the secrets are the
// test's own, so no older file holds them).
func credsSearchArgs(t *testing.T, bin string, secrets []credsSecret, paths ...string) []string {
	args := []string{bin, "-since", fmt.Sprint(credsSince(t))}
	for _, s := range secrets {
		args = append(args, "-secret", s.name+"="+hex.EncodeToString(s.b))
	}
	for _, p := range paths {
		args = append(args, "-path", p)
	}
	return args
}

// credsSince is when the test began, a second early.
func credsSince(t *testing.T) int64 {
	credsStarts.Lock()
	defer credsStarts.Unlock()
	if credsStarts.m == nil {
		credsStarts.m = map[string]int64{}
	}
	if _, ok := credsStarts.m[t.Name()]; !ok {
		credsStarts.m[t.Name()] = time.Now().Unix() - 1
		credsDecoy(t)
	}
	return credsStarts.m[t.Name()]
}

// credsDecoy leaves a file anyone may read, changed after the test began,
// so that every search that can read files reads one: on a quiet machine
// nothing else outside the hidden directories may have changed since.
func credsDecoy(t *testing.T) {
	dir, err := os.MkdirTemp("", "runway-hostile-decoy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "readable"), []byte("nothing secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

var credsStarts struct {
	sync.Mutex
	m map[string]int64
}

// credsFindings is what a search printed: the secrets found (FOUND), the
// paths it opened (OPENED), the entries it visited and the files it read.
type credsFindings struct {
	found, opened  []string
	visited, files int
	done           bool
}

func credsParse(out string) credsFindings {
	var f credsFindings
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "FOUND "):
			f.found = append(f.found, line)
		case strings.HasPrefix(line, "OPENED "):
			f.opened = append(f.opened, line)
		case strings.HasPrefix(line, "SEARCHED "):
			f.done = true
			_, _ = fmt.Sscanf(line, "SEARCHED %d %d", &f.visited, &f.files)
		}
	}
	return f
}

// credsCA signs the tests' certificates.
type credsCA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func newCredsCA(t *testing.T) *credsCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hostile-creds CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &credsCA{cert: cert, der: der, key: key}
}

// issue writes ca.crt, NAME.crt and NAME.key (a certificate for 127.0.0.1
// and localhost, server and client use) into dir, each with mode, and
// returns the key's PEM.
func (ca *credsCA) issue(t *testing.T, dir, name string, mode os.FileMode) []byte {
	t.Helper()
	write := func(file string, block *pem.Block) []byte {
		b := pem.EncodeToMemory(block)
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return b
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost", name}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.crt", &pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
	write(name+".crt", &pem.Block{Type: "CERTIFICATE", Bytes: der})
	return write(name+".key", &pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

// credsStartEtcdTLS runs bin/etcd serving TLS on loopback, requiring
// client certificates of the CA (its own files in certs: etcd.crt,
// etcd.key, ca.crt); it returns its client URL.
func credsStartEtcdTLS(t *testing.T, dataDir, certs string) (string, *credsProc) {
	t.Helper()
	bin := filepath.Join(credsRoot(t), "bin", "etcd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("standalone etcd %s is missing (%v): run `make test-bins` to build it", bin, err)
	}
	clientURL, peerURL := "https://"+credsFreeAddr(t), "http://"+credsFreeAddr(t)
	p := credsStart(t, "etcd", nil, nil, bin, "--name", "creds", "--data-dir", dataDir,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "creds="+peerURL, "--initial-cluster-state", "new",
		"--cert-file", filepath.Join(certs, "etcd.crt"), "--key-file", filepath.Join(certs, "etcd.key"),
		"--trusted-ca-file", filepath.Join(certs, "ca.crt"), "--client-cert-auth",
		"--unsafe-no-fsync", "--log-level", "error")
	return clientURL, p
}

// credsControlPlane is every service as its own `runway serve` process
// on the TLS etcd, and the administrator's token.
type credsControlPlane struct {
	procs []*credsProc
	token string
	conn  *grpc.ClientConn // to the workload service; quota's too through conns
	conns map[string]*grpc.ClientConn
	addrs map[string]string
}

// credsStartControlPlane starts identity (signing the administrator in),
// quota, workload, scheduler and nodemanager with etcdFlags.
func credsStartControlPlane(t *testing.T, etcdFlags []string, first *credsProc) *credsControlPlane {
	t.Helper()
	cp := &credsControlPlane{procs: []*credsProc{first}, conns: map[string]*grpc.ClientConn{}, addrs: map[string]string{}}
	addrs := cp.addrs
	serve := func(name string, args ...string) {
		addr := credsFreeAddr(t)
		p := credsStart(t, name, nil, nil, credsRunway(t), append(append([]string{"serve", name, "--listen", addr,
			"--metrics-listen", "none"}, etcdFlags...), args...)...)
		cp.procs = append(cp.procs, p)
		addrs[name] = addr
		conn := credsDial(t, addr, "")
		credsServing(t, p, conn)
		if name == "identity" {
			var password string
			credsEventually(t, 20*time.Second, "the one-time password", cp.procs, func() string {
				for line := range strings.Lines(p.out.String()) {
					if _, pw, ok := strings.Cut(strings.TrimSpace(line), "one-time password: "); ok {
						password = pw
						return ""
					}
				}
				return "not printed yet"
			})
			r, err := identityv1.NewIdentityServiceClient(conn).Login(t.Context(), &identityv1.LoginRequest{
				Credentials: &identityv1.LoginRequest_Password{Password: &identityv1.PasswordCredentials{
					User: "admin", Password: password, NewPassword: "the administrator's own password"}}})
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			cp.token = r.GetAccessToken()
		}
		cp.conns[name] = credsDial(t, addr, cp.token)
	}
	serve("identity")
	serve("quota")
	keyFile := filepath.Join(t.TempDir(), "credentials.keys")
	if out, err := exec.Command(credsRunway(t), "admin", "credentials", "add-key", "--key-file", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("runway admin credentials add-key: %v\n%s", err, out)
	}
	serve("workload", "--quota-server", addrs["quota"], "--credentials-key-file", keyFile)
	serve("scheduler", "--replica", "sched-1")
	serve("nodemanager")
	cp.conn = cp.conns["workload"]
	return cp
}

// credsPEMBody is a line of a PEM block's base64 body: what a thief's
// search would match, whatever framing the file has.
func credsPEMBody(pemBytes []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(pemBytes), []byte("\n"))
	return lines[1]
}
