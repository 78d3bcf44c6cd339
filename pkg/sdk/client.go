package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/loopback"
)

// Client holds one connection to a Runway server and the generated client
// of every service on it. The typed helpers (SubmitWorkload, Workloads, ...)
// cover the common calls; anything else goes through the service clients.
type Client struct {
	conn *grpc.ClientConn

	QuotaService      quotav1.QuotaServiceClient
	WorkloadService   workloadv1.WorkloadServiceClient
	GovernanceService workloadv1.GovernanceServiceClient
	CredentialService workloadv1.CredentialServiceClient
	DataSourceService workloadv1.DataSourceServiceClient
	// NotificationService: the caller's subscriptions and deliveries.
	NotificationService workloadv1.NotificationServiceClient
	SchedulerService    schedulerv1.SchedulerServiceClient
	NodeManagerService  nodemanagerv1.NodeManagerServiceClient
	IdentityService     identityv1.IdentityServiceClient
	MetricsService      metricsv1.MetricsServiceClient
	ReportService       metricsv1.ReportServiceClient
}

// Dial connects to cfg.Server. It does not wait for the server: the first
// call fails (Unavailable) if it is not there. Extra options are passed to
// grpc.NewClient after Runway's own.
func Dial(ctx context.Context, cfg Config, opts ...grpc.DialOption) (*Client, error) {
	if cfg.Server == "" {
		return nil, fmt.Errorf("no Runway server: set %s (for example %s=127.0.0.1:7070) or run `runway login`", EnvServer, EnvServer)
	}
	target, secure := cfg.Server, false
	switch {
	case strings.HasPrefix(target, "https://"):
		target, secure = strings.TrimPrefix(target, "https://"), true
		if !strings.Contains(target, ":") {
			target += ":443"
		}
	case strings.HasPrefix(target, "http://"):
		target = strings.TrimPrefix(target, "http://")
	}
	target = strings.TrimSuffix(target, "/")
	creds := insecure.NewCredentials()
	if secure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CAFile != "" {
			b, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("CA file: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(b) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate", cfg.CAFile)
			}
		}
		creds = credentials.NewTLS(tc)
	} else if cfg.CAFile != "" {
		return nil, fmt.Errorf("a CA file is for a TLS server: write the server as https://%s", target)
	} else if host, _, err := net.SplitHostPort(target); (err != nil || !loopback.Host(host)) && !cfg.Insecure {
		// Plaintext would carry the token and every answer in the clear:
		// only to this machine, unless asked for by name.
		return nil, fmt.Errorf("%s is not a loopback address: write https://%s for TLS, or set %s=1 (Config.Insecure) to call it in plaintext",
			cfg.Server, target, EnvInsecure)
	}
	all := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if cfg.Token != "" {
		all = append(all, grpc.WithPerRPCCredentials(bearer{token: cfg.Token, secure: secure}))
	}
	conn, err := grpc.NewClient("passthrough:///"+target, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Server, err)
	}
	return newClient(conn), nil
}

// NewClient wraps a connection the caller made (tests, custom transports).
// Close closes it.
func NewClient(conn *grpc.ClientConn) *Client { return newClient(conn) }

func newClient(conn *grpc.ClientConn) *Client {
	return &Client{
		conn:                conn,
		QuotaService:        quotav1.NewQuotaServiceClient(conn),
		WorkloadService:     workloadv1.NewWorkloadServiceClient(conn),
		GovernanceService:   workloadv1.NewGovernanceServiceClient(conn),
		CredentialService:   workloadv1.NewCredentialServiceClient(conn),
		DataSourceService:   workloadv1.NewDataSourceServiceClient(conn),
		NotificationService: workloadv1.NewNotificationServiceClient(conn),
		SchedulerService:    schedulerv1.NewSchedulerServiceClient(conn),
		NodeManagerService:  nodemanagerv1.NewNodeManagerServiceClient(conn),
		IdentityService:     identityv1.NewIdentityServiceClient(conn),
		MetricsService:      metricsv1.NewMetricsServiceClient(conn),
		ReportService:       metricsv1.NewReportServiceClient(conn),
	}
}

// Close closes the connection.
func (c *Client) Close() error {
	if c == nil || c.conn == nil {
		return errors.New("sdk: Close of a nil client")
	}
	return c.conn.Close()
}

// bearer sends the token with every call. Plaintext is allowed because
// `runway dev` serves loopback without TLS; over a network use https://.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
