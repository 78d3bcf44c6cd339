package workload

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// maxWebhookBody bounds what one webhook POST carries.
const maxWebhookBody = 16 << 10

// deliver sends one notification over the subscription's channel.
func (n *Notifications) deliver(ctx context.Context, s *workloadv1.Subscription, nt *workloadv1.Notification) error {
	switch ch := s.GetChannel().(type) {
	case *workloadv1.Subscription_Webhook:
		return n.postWebhook(ctx, ch.Webhook, nt)
	case *workloadv1.Subscription_Email:
		return n.sendEmail(ctx, ch.Email, nt)
	}
	return errors.New("the subscription has no channel")
}

// text is a notification for people: Slack's text, an email's body.
func text(nt *workloadv1.Notification) string {
	return fmt.Sprintf("[Runway] %s: %s", eventName(nt.GetEvent()), nt.GetMessage())
}

// eventName is the CLI's name of an event: "pending-too-long".
func eventName(e workloadv1.NotificationEvent) string {
	s := strings.TrimPrefix(e.String(), "NOTIFICATION_EVENT_")
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "WORKLOAD_")), "_", "-")
}

// webhookClient dials only where the egress policy allows, at every
// connection (the address dialled is checked), and follows no redirect.
func (n *Notifications) webhookClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: n.cfg.Egress.Dial, Proxy: nil, TLSHandshakeTimeout: 10 * time.Second,
			TLSClientConfig:       &tls.Config{RootCAs: n.cfg.RootCAs, MinVersion: tls.VersionTLS12},
			ResponseHeaderTimeout: attemptTimeout, MaxIdleConns: 1, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (n *Notifications) postWebhook(ctx context.Context, w *workloadv1.WebhookChannel, nt *workloadv1.Notification) error {
	var body []byte
	var err error
	if w.GetSlack() {
		body, err = jsonText(text(nt))
	} else {
		body, err = protojson.Marshal(nt)
	}
	if err != nil {
		return err
	}
	if len(body) > maxWebhookBody {
		return fmt.Errorf("the payload is %d bytes, more than %d", len(body), maxWebhookBody)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.GetUrl(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Runway-Notifications/1")
	req.Header.Set("Idempotency-Key", nt.GetDeliveryId())
	resp, err := n.webhookClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the webhook answered %s: %q", resp.Status, strings.TrimSpace(string(head)))
	}
	return nil
}

// jsonText is Slack's incoming-webhook payload, {"text": ...}.
func jsonText(s string) ([]byte, error) { return json.Marshal(map[string]string{"text": s}) }

// smtpLogin is the username and password of an SMTP credential.
func (n *Notifications) smtpLogin(ctx context.Context, name string) (user, pass string, err error) {
	scope, id, err := credentialAsset.parse(name, "credential")
	if err != nil {
		return "", "", err
	}
	it, err := n.creds.g.creds.Get(ctx, storeKey(scope, id))
	if errors.Is(err, etcdstore.ErrNotFound) {
		return "", "", fmt.Errorf("credential %s does not exist", name)
	}
	if err != nil {
		return "", "", err
	}
	vals, err := n.creds.open(it.Msg)
	if err != nil {
		return "", "", fmt.Errorf("credential %s: %w", name, err)
	}
	if vals["username"] == "" || vals["password"] == "" {
		return "", "", fmt.Errorf("credential %s must hold username and password", name)
	}
	return vals["username"], vals["password"], nil
}

func (n *Notifications) sendEmail(ctx context.Context, e *workloadv1.EmailChannel, nt *workloadv1.Notification) error {
	host, _, err := net.SplitHostPort(e.GetSmtpServer())
	if err != nil {
		return err
	}
	conn, err := n.cfg.Egress.Dial(ctx, "tcp", e.GetSmtpServer())
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	tc := &tls.Config{ServerName: host, RootCAs: n.cfg.RootCAs, MinVersion: tls.VersionTLS12}
	if e.GetTls() == workloadv1.SmtpTls_SMTP_TLS_IMPLICIT {
		conn = tls.Client(conn, tc)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("smtp %s: %w", e.GetSmtpServer(), err)
	}
	defer c.Close()
	if e.GetTls() == workloadv1.SmtpTls_SMTP_TLS_STARTTLS || e.GetTls() == workloadv1.SmtpTls_SMTP_TLS_UNSPECIFIED {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("smtp %s does not offer STARTTLS", e.GetSmtpServer())
		}
		if err := c.StartTLS(tc); err != nil {
			return fmt.Errorf("smtp %s: STARTTLS: %w", e.GetSmtpServer(), err)
		}
	}
	if name := e.GetCredential(); name != "" {
		user, pass, err := n.smtpLogin(ctx, name)
		if err != nil {
			return err
		}
		if err := c.Auth(smtp.PlainAuth("", user, pass, host)); err != nil {
			return fmt.Errorf("smtp %s: AUTH: %w", e.GetSmtpServer(), err)
		}
	}
	if err := c.Mail(e.GetFrom()); err != nil {
		return fmt.Errorf("smtp %s: MAIL FROM: %w", e.GetSmtpServer(), err)
	}
	if err := c.Rcpt(e.GetTo()); err != nil {
		return fmt.Errorf("smtp %s: RCPT TO: %w", e.GetSmtpServer(), err)
	}
	wc, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp %s: DATA: %w", e.GetSmtpServer(), err)
	}
	if _, err := wc.Write(emailMessage(e, nt)); err != nil {
		return err
	}
	if err := wc.Close(); err != nil {
		return fmt.Errorf("smtp %s: the message was refused: %w", e.GetSmtpServer(), err)
	}
	return c.Quit()
}

// emailMessage is the RFC 5322 message: headers from checked addresses, a
// subject and body without line breaks of their own.
func emailMessage(e *workloadv1.EmailChannel, nt *workloadv1.Notification) []byte {
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	subject := oneLine(clip(text(nt), 200))
	lines := []string{
		"From: " + e.GetFrom(), "To: " + e.GetTo(), "Subject: " + subject,
		"Date: " + nt.GetEventTime().AsTime().Format(time.RFC1123Z),
		"Message-ID: <" + nt.GetDeliveryId() + "@runway>", "MIME-Version: 1.0",
		"Content-Type: text/plain; charset=utf-8", "",
		oneLine(nt.GetMessage()), "",
		"Resource: " + nt.GetResource(), "Subscription: " + nt.GetSubscription(), "Delivery: " + nt.GetDeliveryId(),
	}
	return []byte(strings.Join(lines, "\r\n") + "\r\n")
}

// sortByCreate orders deliveries oldest first.
func sortByCreate(items []etcdstore.Item[*workloadv1.Delivery]) {
	slices.SortFunc(items, func(a, b etcdstore.Item[*workloadv1.Delivery]) int {
		return a.Msg.GetCreateTime().AsTime().Compare(b.Msg.GetCreateTime().AsTime())
	})
}
