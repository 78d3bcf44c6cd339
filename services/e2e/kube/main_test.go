package kube_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// The one kube-apiserver of this test binary (TestMain), with its own
// embedded etcd. Each test has its own Runway (server.RunDev) and its own
// namespaces and nodes, which it deletes at cleanup.
var (
	apiserver  *rest.Config
	kubeconfig string // a kubeconfig file for apiserver, as `runway serve --kubeconfig` reads it
	kubeSkip   string // why the tests skip: the binary is not built
)

// kubeAPIServerBin is bin/kube-apiserver (make kube-apiserver), or
// $RUNWAY_KUBE_APISERVER.
func kubeAPIServerBin() string {
	if p := os.Getenv("RUNWAY_KUBE_APISERVER"); p != "" {
		return p
	}
	p, _ := filepath.Abs("../../../bin/kube-apiserver")
	return p
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin := kubeAPIServerBin()
	if _, err := os.Stat(bin); err != nil {
		kubeSkip = fmt.Sprintf("kube-apiserver %s is missing (%v): run `make kube-apiserver` to build it from its Go module", bin, err)
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "runway-kube-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	stop, cfg, err := startAPIServer(bin, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube-apiserver:", err)
		return 1
	}
	defer stop()
	apiserver, kubeconfig = cfg, filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: admin}}]
current-context: test
`, cfg.Host, cfg.BearerToken)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// startAPIServer starts an embedded etcd and kube-apiserver against it
// (the flags of ../shared/TOOLCHAIN.md §4) and waits until /readyz is ok.
func startAPIServer(bin, dir string) (stop func(), cfg *rest.Config, err error) {
	e, err := etcdtest.StartEmbedded(filepath.Join(dir, "etcd"), "http://127.0.0.1:0",
		etcdtest.WithTestSpeedups(), etcdtest.WithLogger(zap.NewNop()))
	if err != nil {
		return nil, nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	const token = "runway-test-admin"
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",admin,admin-uid,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			e.Close()
			return nil, nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	log, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	cmd := exec.Command(bin,
		"--etcd-servers=http://"+e.Clients[0].Addr().String(),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--secure-port="+strconv.Itoa(port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--authorization-mode=AlwaysAllow",
		"--disable-admission-plugins=ServiceAccount")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.Close()
		return nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = log.Close()
		e.Close()
	}
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	start := time.Now()
	for {
		req, _ := http.NewRequest(http.MethodGet, host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := hc.Do(req); err == nil {
			ok := resp.StatusCode == http.StatusOK
			_ = resp.Body.Close()
			if ok {
				break
			}
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(log.Name())
			e.Close()
			return nil, nil, fmt.Errorf("kube-apiserver exited:\n%s", tail(b, 4000))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(start) > 90*time.Second {
			stop()
			b, _ := os.ReadFile(log.Name())
			return nil, nil, fmt.Errorf("kube-apiserver not ready after 90s:\n%s", tail(b, 4000))
		}
	}
	fmt.Fprintf(os.Stderr, "kube-apiserver ready in %v\n", time.Since(start).Round(100*time.Millisecond))
	return stop, &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS: 200, Burst: 400}, nil
}

func tail(b []byte, n int) string {
	return string(b[max(len(b)-n, 0):])
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// kubeClient is a client of the shared apiserver; the test skips when it
// could not be built.
func kubeClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	if kubeSkip != "" {
		t.Skip(kubeSkip)
	}
	cs, err := kubernetes.NewForConfig(apiserver)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
