package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/bounds"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// oversize sets the first string field of m, depth first in field order,
// to one byte more than pkg/bounds allows and returns its path ("" when m
// has no string field).
func oversize(m protoreflect.Message, path string) string {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		p := fd.TextName()
		if path != "" {
			p = path + "." + p
		}
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			m.Mutable(fd).List().Append(protoreflect.ValueOfString(strings.Repeat("a", 32<<10+1)))
			return p + "[0]"
		case fd.IsList():
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(strings.Repeat("a", 32<<10+1)))
			return p
		case fd.Kind() == protoreflect.MessageKind:
			if got := oversize(m.Mutable(fd).Message(), p); got != "" {
				return got
			}
			m.Clear(fd)
		}
	}
	return ""
}

// TestOversizedInputOnEveryRPC sends, to every RPC the dev server serves,
// its request with one string field past pkg/bounds' limit: each answers
// INVALID_ARGUMENT naming that field, as an unauthenticated caller too
// (before any handler or the audit log sees it), and nothing is written.
func TestOversizedInputOnEveryRPC(t *testing.T) {
	tn := startTenancy(t)
	anon := tn.conn(t, "not a token")
	checked := 0
	for name := range auth.Methods() {
		svc, method, _ := strings.Cut(strings.TrimPrefix(name, "/"), "/")
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
		in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		req := in.New()
		field := oversize(req, "")
		if field == "" || strings.HasPrefix(svc, "grpc.") || strings.HasSuffix(svc, "NodeAgentService") {
			continue // nothing to oversize (GetCaller, ListRoles), gRPC's own, or served by the agents
		}
		for who, conn := range map[string]*grpc.ClientConn{"administrator": tn.admin, "anonymous": anon} {
			err := invokeErr(t.Context(), conn, name, md, req.Interface())
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), fmt.Sprintf("%q", field)) {
				t.Errorf("%s (%s) with %s oversized: %v, want InvalidArgument naming it", name, who, field, err)
			}
			checked++
		}
	}
	t.Logf("%d oversized calls checked", checked)
	if checked < 100 {
		t.Errorf("only %d calls checked", checked)
	}
	r, err := workloadv1.NewWorkloadServiceClient(tn.admin).ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/-"})
	if err != nil || len(r.GetWorkloads()) != 3 {
		t.Errorf("workloads after the oversized calls: %v, %v", r, err)
	}
	p, err := quotav1.NewQuotaServiceClient(tn.admin).ListProjects(t.Context(), &quotav1.ListProjectsRequest{})
	if err != nil || len(p.GetProjects()) != 3 {
		t.Errorf("projects after the oversized calls: %v, %v", p, err)
	}
}

// invokeErr calls method with req, unary or as the first message of a
// server stream, and returns the error.
func invokeErr(ctx context.Context, conn *grpc.ClientConn, method string, md protoreflect.MethodDescriptor, req proto.Message) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return err
	}
	resp := out.New().Interface()
	if !md.IsStreamingServer() {
		return conn.Invoke(ctx, method, req, resp)
	}
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err == nil {
		if err = st.SendMsg(req); err == nil {
			if err = st.CloseSend(); err == nil {
				err = st.RecvMsg(resp)
			}
		}
	}
	return err
}

// zeros is an endless reader of zero bytes: a client body that costs the
// client nothing, so the test's allocations are the server's.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// letters is zeros with the letter a: a JSON string's contents.
type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// hugeLogin is a well-formed JSON sign-in whose user is n bytes long.
func hugeLogin(n int64) io.Reader {
	return io.MultiReader(strings.NewReader(`{"password":{"user":"`), io.LimitReader(letters{}, n), strings.NewReader(`","password":"x"}}`))
}

// allocated runs f and returns how many bytes the process allocated
// meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestOversizedBodiesOverRESTAndGRPC: a 64 MiB sign-in (REST body, or one
// gRPC message), unauthenticated, is refused with the limit named (413 over
// REST, RESOURCE_EXHAUSTED over gRPC) while the server allocates a small
// part of it; every REST route that takes a body answers 413 to one past
// the limit, and every route with a name in its path INVALID_ARGUMENT to an
// oversized name.
func TestOversizedBodiesOverRESTAndGRPC(t *testing.T) {
	tn := startTenancy(t)
	const huge = 64 << 20
	limit := fmt.Sprint(grpcserver.DefaultMaxMessageBytes)

	var code int
	var body string
	n := allocated(func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+tn.addr+"/v1/auth:login", hugeLogin(huge))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = huge + int64(len(`{"password":{"user":"","password":"x"}}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(b)
	})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, limit) {
		t.Errorf("REST Login of 64 MiB: %d %s, want 413 naming %s", code, body, limit)
	}
	if n > 16<<20 {
		t.Errorf("REST Login of 64 MiB allocated %d MiB", n>>20)
	}
	t.Logf("REST Login of 64 MiB: %d KiB allocated", n>>10)

	// The same without a Content-Length (chunked): the limit holds while
	// reading.
	n = allocated(func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+tn.addr+"/v1/auth:login", hugeLogin(huge))
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		code = resp.StatusCode
	})
	if code != http.StatusRequestEntityTooLarge || n > 16<<20 {
		t.Errorf("chunked REST Login of 64 MiB: %d, %d MiB allocated", code, n>>20)
	}

	// gRPC: one message announcing 64 MiB, over h2c.
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	var grpcStatus, grpcMessage string
	n = allocated(func() {
		prefix := make([]byte, 5)
		binary.BigEndian.PutUint32(prefix[1:], huge)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+tn.addr+"/runway.identity.v1.IdentityService/Login",
			io.MultiReader(bytes.NewReader(prefix), io.LimitReader(zeros{}, huge)))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, err := h2c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		grpcStatus, grpcMessage = resp.Trailer.Get("Grpc-Status")+resp.Header.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")+resp.Header.Get("Grpc-Message")
	})
	if grpcStatus != fmt.Sprint(int(codes.ResourceExhausted)) || !strings.Contains(grpcMessage, limit) {
		t.Errorf("gRPC Login of 64 MiB: status %q %q, want RESOURCE_EXHAUSTED naming %s", grpcStatus, grpcMessage, limit)
	}
	if n > 16<<20 {
		t.Errorf("gRPC Login of 64 MiB allocated %d MiB", n>>20)
	}
	t.Logf("gRPC Login of 64 MiB: %d KiB allocated", n>>10)

	// Every REST route.
	_, file, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "gen", "openapi", "runway.swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &spec); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	long := strings.Repeat("a", bounds.String+1)
	token := tokenOf(t, tn)
	rest := func(method, path string, body io.Reader) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+tn.addr+path, body)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	routes := 0
	for path, ops := range spec.Paths {
		for op := range ops {
			switch method := strings.ToUpper(op); method {
			case http.MethodPost, http.MethodPatch:
				code, b := rest(method, param.ReplaceAllString(path, "x"), io.LimitReader(zeros{}, grpcserver.DefaultMaxMessageBytes+1))
				if code != http.StatusRequestEntityTooLarge || !strings.Contains(b, limit) {
					t.Errorf("%s %s with a body past the limit: %d %s", method, path, code, b)
				}
				routes++
			case http.MethodGet, http.MethodDelete:
				if !param.MatchString(path) {
					continue
				}
				code, b := rest(method, param.ReplaceAllString(path, long), nil)
				if code != http.StatusBadRequest || !strings.Contains(b, fmt.Sprintf("at most %d", bounds.String)) {
					t.Errorf("%s %s with an oversized name: %d %.300s", method, path, code, b)
				}
				routes++
			}
		}
	}
	t.Logf("%d REST routes checked", routes)
	http.DefaultClient.CloseIdleConnections()
}

// tokenOf is the administrator's token of tn (its connection's
// credentials).
func tokenOf(t *testing.T, tn *tenancy) string {
	t.Helper()
	for tok, c := range tn.conns {
		if c == tn.admin {
			return tok
		}
	}
	t.Fatal("no administrator token")
	return ""
}
