package workload_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
)

// testCA is a server certificate for 127.0.0.1 (pkg/grpcserver/tlstest)
// and the pool of its CA.
func testCA(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	f := tlstest.New(t)
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA")
	}
	return cert, pool
}

// authMailbox is a go-smtp server offering STARTTLS and AUTH PLAIN only
// over TLS, accepting one user and password, keeping each message with the
// user who sent it.
type authMailbox struct {
	addr string
	mu   sync.Mutex
	msgs []string
}

type authSession struct {
	box  *authMailbox
	conn *smtp.Conn
	user string
}

func (s *authSession) Reset()        {}
func (s *authSession) Logout() error { return nil }
func (s *authSession) AuthMechanisms() []string {
	return []string{sasl.Plain}
}
func (s *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if _, tlsOn := s.conn.TLSConnectionState(); !tlsOn {
			return errors.New("no AUTH without TLS")
		}
		if user != "mailer" || pass != "s3cret-smtp-pass" {
			return errors.New("bad credentials")
		}
		s.user = user
		return nil
	}), nil
}
func (s *authSession) Mail(string, *smtp.MailOptions) error {
	if s.user == "" {
		return errors.New("authenticate first")
	}
	return nil
}
func (s *authSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *authSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, "AUTH "+s.user+"\n"+string(b))
	s.box.mu.Unlock()
	return nil
}

func newAuthMailbox(t *testing.T, cert tls.Certificate) *authMailbox {
	box := &authMailbox{}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &authSession{box: box, conn: c}, nil }))
	srv.Domain = "127.0.0.1"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return box
}

func (b *authMailbox) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.msgs...)
}

// TestDispatcher_emailOverTLS: email with STARTTLS (the server's
// certificate checked against RootCAs, the test CA) and AUTH PLAIN with the username
// and password of a credential the administrator holds; a researcher
// cannot name that credential (its values would go to the server she
// names). The password appears in no delivery record.
func TestDispatcher_emailOverTLS(t *testing.T) {
	cert, pool := testCA(t)
	cfg := fastNotify
	cfg.RootCAs = pool
	e := startNotify(t, cfg)
	e.user(t, "root", "roles/system-admin", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT})
	e.user(t, "alice", "roles/l1-researcher", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	box := newAuthMailbox(t, cert)
	_, ctx := e.client("users/root")
	if _, err := workloadv1.NewCredentialServiceClient(e.conn).CreateCredential(ctx, &workloadv1.CreateCredentialRequest{CredentialId: "smtp",
		Credential: &workloadv1.Credential{Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC,
			Values: map[string]string{"username": "mailer", "password": "s3cret-smtp-pass"}}}); err != nil {
		t.Fatal(err)
	}
	email := func(to string) *workloadv1.Subscription {
		return &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_FAILED},
			Channel: &workloadv1.Subscription_Email{Email: &workloadv1.EmailChannel{To: to, From: "runway@example.com",
				SmtpServer: box.addr, Tls: workloadv1.SmtpTls_SMTP_TLS_STARTTLS, Credential: "credentials/smtp"}}}
	}
	ac, actx := e.client("users/alice")
	if _, err := ac.CreateSubscription(actx, &workloadv1.CreateSubscriptionRequest{Parent: "users/-", Subscription: email("alice@example.com")}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("alice naming the administrator's SMTP credential: %v, want PermissionDenied", err)
	}
	none := email("ops@example.com")
	none.GetEmail().Tls = workloadv1.SmtpTls_SMTP_TLS_NONE
	rc, rctx := e.client("users/root")
	if _, err := rc.CreateSubscription(rctx, &workloadv1.CreateSubscriptionRequest{Parent: "users/-", Subscription: none}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a credential without TLS: %v, want InvalidArgument", err)
	}
	sub := e.subscribe(t, "users/root", email("ops@example.com"))
	e.runDispatcher(t)
	e.failed(t, "team-a", "w1")
	waitFor(t, "the email", func() bool { return len(box.messages()) == 1 })
	m := box.messages()[0]
	if !strings.HasPrefix(m, "AUTH mailer\n") || !strings.Contains(m, "Subject: [Runway] failed: Workload projects/team-a/workloads/w1 failed.") ||
		!strings.Contains(m, "To: ops@example.com") {
		t.Errorf("the email:\n%s", m)
	}
	l, err := rc.ListDeliveries(rctx, &workloadv1.ListDeliveriesRequest{Parent: sub.GetName()})
	if err != nil || len(l.GetDeliveries()) != 1 || l.GetDeliveries()[0].GetState() != workloadv1.DeliveryState_DELIVERY_STATE_SENT ||
		strings.Contains(l.String(), "s3cret") {
		t.Errorf("deliveries: %v %v", l, err)
	}
}
