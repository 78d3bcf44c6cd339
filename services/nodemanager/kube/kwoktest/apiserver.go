package kwoktest

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
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// adminToken is the apiserver's one user, in group system:masters (RBAC
// lets it do anything; service accounts' tokens get what their roles say).
const adminToken = "runway-test-admin"

// StartAPIServer starts an embedded etcd and bin (a kube-apiserver) against
// it, with the flags of ../shared/TOOLCHAIN.md §4 (and no node taints by
// condition), files in dir, and waits
// until /readyz is ok. stop ends both.
func StartAPIServer(bin, dir string) (stop func(), cfg *rest.Config, err error) {
	e, err := etcdtest.StartEmbedded(filepath.Join(dir, "etcd"), "http://127.0.0.1:0",
		etcdtest.WithTestSpeedups(), etcdtest.WithLogger(zap.NewNop()))
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (func(), *rest.Config, error) {
		e.Close()
		return nil, nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fail(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(adminToken + ",admin,admin-uid,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fail(err)
		}
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	log, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(bin,
		"--etcd-servers=http://"+e.Clients[0].Addr().String(),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--secure-port="+strconv.Itoa(port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--authorization-mode=RBAC",
		// No controller-manager runs: no one creates service accounts, or
		// lifts the not-ready taint a new node is created with.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		terminate(cmd.Process, exited, 15*time.Second)
		_ = log.Close()
		e.Close()
	}
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	start := time.Now()
	for {
		req, _ := http.NewRequest(http.MethodGet, host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
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
	return stop, &rest.Config{Host: host, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS: 200, Burst: 400}, nil
}

// WriteKubeconfig writes a kubeconfig file for cfg (as `runway serve
// --kubeconfig` and KWOK read it).
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: admin}}]
current-context: test
`, cfg.Host, cfg.BearerToken)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// terminate sends p SIGTERM and waits for exited, killing it after wait.
func terminate(p *os.Process, exited <-chan struct{}, wait time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(wait):
		_ = p.Kill()
		<-exited
	}
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
