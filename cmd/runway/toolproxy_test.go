package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
	"github.com/runwayhq/runway/pkg/toolproxy"
)

// toolEcho builds testdata/toolecho statically and an image of it on the
// engine: the pod that serves the tool.
func toolEcho(t *testing.T, e *podmantest.Engine) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "toolecho")
	build := exec.Command("go", "build", "-o", bin, "./testdata/toolecho")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the echo server: %v\n%s", err, out)
	}
	return e.ImageWith(t, "localhost/runway-toolecho:test", map[string]string{"/bin/toolecho": bin})
}

// toolFixture is runway dev on podman with the echo server's image,
// projects team-a and team-b and a researcher of each (alice, bob).
type toolFixture struct {
	engine            *podmantest.Engine
	image, proxy      string
	dev               *devServer
	admin, alice, bob *session
}

func startToolFixture(t *testing.T) *toolFixture {
	t.Helper()
	f := &toolFixture{engine: podmantest.Start(t)}
	f.image = toolEcho(t, f.engine)
	f.dev = startDevAt(t, t.TempDir(), []string{"DOCKER_HOST=" + f.engine.Host}, "--runtime", "container")
	f.proxy = proxyAddr(t, f.dev)
	f.admin = f.dev.session(t, f.dev.token)
	f.admin.ok(t, "", "project", "create", "team-a", "--gpu", "2")
	f.admin.ok(t, "", "project", "create", "team-b", "--gpu", "2")
	f.alice, f.bob = researcher(t, f.dev, "alice", "team-a"), researcher(t, f.dev, "bob", "team-b")
	return f
}

// proxyAddr is the tool proxy's address, from runway dev's "Tools:" line.
func proxyAddr(t *testing.T, d *devServer) string {
	t.Helper()
	re := regexp.MustCompile(`Tools: http://(\S+)/proxy/`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if m := re.FindStringSubmatch(d.logs.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("runway dev printed no Tools line:\n%s", d.logs.String())
		}
	}
}

// tokenOf is the access token a signed-in session keeps in its config.
func tokenOf(t *testing.T, s *session) string {
	t.Helper()
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Token string }
	if err := json.Unmarshal(b, &c); err != nil || c.Token == "" {
		t.Fatalf("config %s holds no token: %v", s.config, err)
	}
	return c.Token
}

// echoed is what the echo server saw of a request.
type echoed struct {
	Path   string
	Header http.Header
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func bearerHeader(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// wsEcho sends one message over a WebSocket to the tool and returns the
// answer.
func wsEcho(t *testing.T, url string, header http.Header, msg string) string {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http://", "ws://", 1), header)
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("WebSocket %s: %v (HTTP %d)", url, err, code)
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, got, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

// A workspace whose environment declares a custom tool, on runway dev with
// the container runtime: the tool's URL (workload describe) answers its
// owner through the proxy, over HTTP and a WebSocket, and refuses a
// caller without credentials (401) and another project's researcher
// (403). A browser's ticket becomes an HttpOnly, SameSite=Strict cookie
// for the workload's path, once, and for that workload only; the API
// accepts that session nowhere; the pod never sees the caller's
// Authorization header or the proxy's cookie, and cannot set that cookie;
// its port is published on the node's loopback only.
func TestCLI_ToolProxy(t *testing.T) {
	f := startToolFixture(t)
	e, img, d, proxy, admin, alice := f.engine, f.image, f.dev, f.proxy, f.admin, f.alice
	aliceToken, bobToken := tokenOf(t, alice), tokenOf(t, f.bob)
	admin.ok(t, "", "environment", "create", "echo", "-p", "team-a", "-i", img, "--tool", "web=custom:8080",
		"--", "/bin/toolecho", "8080")
	alice.ok(t, "", "workspace", "submit", "ws1", "-p", "team-a", "--environment", "echo")
	alice.ok(t, "", "workspace", "submit", "ws2", "-p", "team-a", "--environment", "echo")
	for deadline := time.Now().Add(60 * time.Second); phase(t, alice, "ws1", "team-a") != "WORKLOAD_PHASE_RUNNING"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("ws1 does not run:\n%s", alice.ok(t, "", "workload", "describe", "ws1", "-p", "team-a"))
		}
	}

	url := "http://" + proxy + "/proxy/projects/team-a/workloads/ws1/web/"
	var desc string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if desc = alice.ok(t, "", "workload", "describe", "ws1", "-p", "team-a"); strings.Contains(desc, url) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe does not give the tool's URL %s:\n%s", url, desc)
		}
	}
	// The pod's agent reports its address once the container runs; the
	// server in it listens a moment later.
	var resp *http.Response
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		h := bearerHeader(aliceToken)
		h.Set("Cookie", "mine=1")
		if resp, body = get(t, url+"lab?x=1", h); resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool answered its owner %d: %s", resp.StatusCode, body)
		}
	}
	var seen echoed
	if err := json.Unmarshal([]byte(body), &seen); err != nil {
		t.Fatalf("the tool's answer %q: %v", body, err)
	}
	if seen.Path != "/lab" {
		t.Errorf("the pod got path %q, want /lab (the proxy's prefix off)", seen.Path)
	}
	if seen.Header.Get("Authorization") != "" {
		t.Errorf("the pod got the caller's Authorization header %q", seen.Header.Get("Authorization"))
	}
	if seen.Header.Get("Cookie") != "mine=1" {
		t.Errorf("the pod got Cookie %q, want the tool's own mine=1", seen.Header.Get("Cookie"))
	}
	for _, c := range resp.Cookies() {
		if c.Name == toolproxy.CookieName {
			t.Errorf("the pod set the proxy's cookie: %v", c)
		}
	}
	if got := wsEcho(t, url+"ws", bearerHeader(aliceToken), "hello over the proxy"); got != "hello over the proxy" {
		t.Errorf("the WebSocket echoed %q", got)
	}

	if resp, body := get(t, url, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without credentials: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := get(t, url, bearerHeader("not-a-token")); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("with a bad token: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := get(t, url, bearerHeader(bobToken)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("team-b's researcher: %d %s, want 403", resp.StatusCode, body)
	}
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+proxy+"/proxy/projects/team-a/workloads/ws1/web/ws", bearerHeader(bobToken)); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("team-b's researcher's WebSocket: %v, want 403", err)
	}

	// The browser's way in: a ticket from the API, traded for a cookie.
	ticket := func(workload string) string {
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.addr+"/v1/projects/team-a/workloads/"+workload+":createToolTicket",
			strings.NewReader(`{"tool":"web"}`))
		req.Header = bearerHeader(aliceToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var tk struct{ Ticket, URL string }
		if err := json.Unmarshal(b, &tk); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("createToolTicket: %d %v %s", resp.StatusCode, err, b)
		}
		if want := "http://" + proxy + "/proxy/projects/team-a/workloads/" + workload + "/web/?ticket="; !strings.HasPrefix(tk.URL, want) {
			t.Errorf("the ticket's URL %q does not start %q", tk.URL, want)
		}
		return tk.URL
	}
	ws1Ticket := ticket("ws1")
	resp, body = get(t, ws1Ticket, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/proxy/projects/team-a/workloads/ws1/web/" {
		t.Fatalf("the ticket's URL: %d Location %q %s, want 303 to the tool without the ticket", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == toolproxy.CookieName {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode ||
		session.Path != "/proxy/projects/team-a/workloads/ws1/" || session.Value == "" {
		t.Fatalf("the proxy's cookie is %v, want HttpOnly, SameSite=Strict, Path=/proxy/projects/team-a/workloads/ws1/", session)
	}
	if resp, body := get(t, ws1Ticket, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the ticket used twice: %d %s, want 403", resp.StatusCode, body)
	}
	cookie := http.Header{"Cookie": {toolproxy.CookieName + "=" + session.Value + "; mine=2"}}
	resp, body = get(t, url+"page", cookie)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the tool with the proxy's cookie: %d %s", resp.StatusCode, body)
	}
	seen = echoed{}
	_ = json.Unmarshal([]byte(body), &seen)
	if c := seen.Header.Get("Cookie"); c != "mine=2" || seen.Header.Get("Authorization") != "" {
		t.Errorf("the pod got Cookie %q and Authorization %q, want only the tool's own cookie", c, seen.Header.Get("Authorization"))
	}
	if got := wsEcho(t, url+"ws", cookie, "cookie echo"); got != "cookie echo" {
		t.Errorf("the WebSocket with the cookie echoed %q", got)
	}
	// ws1's ticket and session open nothing of ws2.
	if resp, body := get(t, strings.Replace(ticket("ws1"), "/workloads/ws1/", "/workloads/ws2/", 1), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("ws1's ticket at ws2: %d %s, want 403", resp.StatusCode, body)
	}
	if resp, body := get(t, "http://"+proxy+"/proxy/projects/team-a/workloads/ws2/web/", cookie); resp.StatusCode != http.StatusForbidden {
		t.Errorf("ws1's session at ws2: %d %s, want 403", resp.StatusCode, body)
	}
	// The API takes the session neither as a bearer nor as a cookie.
	api := "http://" + d.addr + "/v1/projects/team-a/workloads/ws1"
	if resp, body := get(t, api, bearerHeader(session.Value)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API with the tool session as its bearer: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := get(t, api, cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API with the proxy's cookie: %d %s, want 401", resp.StatusCode, body)
	}

	// The pod's port is published on the loopback only.
	cli, err := client.New(client.WithHost(e.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		Filters: client.Filters{}.Add("label", container.LabelWorkload+"=ws1")})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("ws1's containers: %v, %v", list.Items, err)
	}
	in, err := cli.ContainerInspect(context.Background(), list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	published, hostPort := 0, ""
	for port, bs := range in.Container.NetworkSettings.Ports {
		for _, b := range bs {
			published++
			hostPort = b.HostPort
			if !b.HostIP.IsLoopback() || port.Num() != 8080 {
				t.Errorf("ws1 publishes %v on %v, want only 8080 on 127.0.0.1", port, b)
			}
		}
	}
	if published != 1 {
		t.Fatalf("ws1 publishes %d ports, want 1: %v", published, in.Container.NetworkSettings.Ports)
	}
	// Another tenant's pod finds the tool at none of the node's addresses
	// (its own bridge's gateway, the node's, its loopback) nor at ws1's
	// container itself.
	targets := []string{"gateway:" + hostPort, "127.0.0.1:" + hostPort}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			targets = append(targets, net.JoinHostPort(ip.IP.String(), hostPort))
		}
	}
	for _, n := range in.Container.NetworkSettings.Networks {
		if n.IPAddress.IsValid() {
			targets = append(targets, net.JoinHostPort(n.IPAddress.String(), "8080"))
		}
	}
	// It reaches its own server the same way: the probe would see one.
	probe := "/bin/toolecho 9090 & sleep 1; /bin/toolecho probe 127.0.0.1:9090 | grep -q OPEN && echo SELF-OK; exec /bin/toolecho probe " +
		strings.Join(targets, " ")
	f.bob.ok(t, "", "training", "submit", "probe", "-p", "team-b", "-i", img, "--", "sh", "-c", probe)
	out := waitLogs(t, f.bob, "probe", "team-b", "probed")
	t.Logf("team-b's probe:\n%s", out)
	if strings.Contains(out, "OPEN") || !strings.Contains(out, "SELF-OK") || len(targets) < 4 {
		t.Errorf("team-b's pod reached ws1's tool (probed %v):\n%s", targets, out)
	}

	// Access is asked again: once alice's rule is deleted, neither her
	// token nor her tool session opens the tool (within the proxy's
	// one-second reuse and the guard's mirror).
	var rules []struct {
		Name    string
		Subject struct{ Name string }
	}
	if err := json.Unmarshal([]byte(admin.ok(t, "", "access-rule", "list", "-o", "json")), &rules); err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Subject.Name == "users/alice" {
			admin.ok(t, "", "access-rule", "delete", strings.TrimPrefix(r.Name, "accessRules/"))
		}
	}
	for _, h := range []http.Header{bearerHeader(aliceToken), cookie} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, _ := get(t, url, h)
			if resp.StatusCode == http.StatusForbidden {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("alice's %v still opens the tool (%d) 10 s after her rule was deleted", h, resp.StatusCode)
			}
		}
	}
}

// Inference endpoints through the same proxy, on the container runtime:
// project access answers who may view the project (403 for another
// project's researcher, 401 without a token), authenticated access any
// signed-in user, public access anyone, and only an account administrator
// may open a public one; the model server never gets the caller's
// Authorization header.
func TestCLI_InferenceEndpoint(t *testing.T) {
	f := startToolFixture(t)
	img, d, proxy, admin, alice := f.image, f.dev, f.proxy, f.admin, f.alice
	aliceToken, bobToken := tokenOf(t, alice), tokenOf(t, f.bob)
	submit := func(s *session, name, access string) result {
		return s.run(t, "", "inference", "submit", name, "-p", "team-a", "-i", img, "--serving-port", "8080",
			"--serving-access", access, "--", "/bin/toolecho", "8080")
	}
	for name, access := range map[string]string{"inf-p": "project", "inf-a": "authenticated"} {
		if r := submit(alice, name, access); r.code != 0 {
			t.Fatalf("submit %s: %s%s", name, r.stdout, r.stderr)
		}
	}
	if r := submit(alice, "inf-pub", "public"); r.code == 0 || !strings.Contains(r.stderr, "accessrules.create") {
		t.Errorf("a researcher's public endpoint: exit %d %s%s, want refused", r.code, r.stdout, r.stderr)
	}
	if r := submit(admin, "inf-pub", "public"); r.code != 0 {
		t.Fatalf("the administrator's public endpoint: %s%s", r.stdout, r.stderr)
	}
	endpoint := func(name string) string { return "http://" + proxy + "/serve/projects/team-a/inference/" + name + "/" }
	for _, name := range []string{"inf-p", "inf-a", "inf-pub"} {
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			desc := admin.ok(t, "", "workload", "describe", name, "-p", "team-a")
			if strings.Contains(desc, endpoint(name)) {
				if resp, _ := get(t, endpoint(name)+"v1/models", bearerHeader(d.token)); resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's endpoint does not answer:\n%s", name, desc)
			}
		}
	}
	for _, c := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"inf-p", bearerHeader(aliceToken), http.StatusOK},
		{"inf-p", bearerHeader(bobToken), http.StatusForbidden},
		{"inf-p", nil, http.StatusUnauthorized},
		{"inf-a", bearerHeader(bobToken), http.StatusOK},
		{"inf-a", nil, http.StatusUnauthorized},
		{"inf-a", bearerHeader("not-a-token"), http.StatusUnauthorized},
		{"inf-pub", nil, http.StatusOK},
		{"nope", nil, http.StatusUnauthorized},
		{"nope", bearerHeader(aliceToken), http.StatusNotFound},
	} {
		resp, body := get(t, endpoint(c.name)+"v1/models", c.header)
		if resp.StatusCode != c.want {
			t.Errorf("%s with %v: %d %s, want %d", c.name, c.header, resp.StatusCode, body, c.want)
			continue
		}
		if c.want != http.StatusOK {
			continue
		}
		var seen echoed
		if err := json.Unmarshal([]byte(body), &seen); err != nil || seen.Path != "/v1/models" || seen.Header.Get("Authorization") != "" {
			t.Errorf("%s: the model server saw path %q and Authorization %q (%v)", c.name, seen.Path, seen.Header.Get("Authorization"), err)
		}
	}
}
