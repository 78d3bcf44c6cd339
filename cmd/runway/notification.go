package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// notificationEvent is the CLI's name of an event: "failed",
// "pending-too-long", "node-lost".
func notificationEvent(e workloadv1.NotificationEvent) string {
	s := strings.TrimPrefix(strings.TrimPrefix(e.String(), "NOTIFICATION_EVENT_"), "WORKLOAD_")
	return strings.ReplaceAll(strings.ToLower(s), "_", "-")
}

// notificationEvents are the events by CLI name, in the enum's order.
func notificationEvents() (names []string, byName map[string]workloadv1.NotificationEvent) {
	byName = map[string]workloadv1.NotificationEvent{}
	for v := range len(workloadv1.NotificationEvent_name) {
		e := workloadv1.NotificationEvent(v)
		if e == workloadv1.NotificationEvent_NOTIFICATION_EVENT_UNSPECIFIED {
			continue
		}
		names = append(names, notificationEvent(e))
		byName[notificationEvent(e)] = e
	}
	return names, byName
}

var smtpTLSModes = map[string]workloadv1.SmtpTls{
	"starttls": workloadv1.SmtpTls_SMTP_TLS_STARTTLS, "implicit": workloadv1.SmtpTls_SMTP_TLS_IMPLICIT, "none": workloadv1.SmtpTls_SMTP_TLS_NONE,
}

// subscribeFlags are `runway notification subscribe`'s.
type subscribeFlags struct {
	webhook, email, smtpServer, from, smtpTLS, smtpCredential, project string
	slack                                                              bool
	events                                                             []string
	pendingAfter, idleAfter                                            time.Duration
	overQuotaPercent                                                   int32
}

func (f *subscribeFlags) subscription() (*workloadv1.Subscription, error) {
	names, byName := notificationEvents()
	s := &workloadv1.Subscription{OverQuotaThresholdPercent: f.overQuotaPercent}
	if len(f.events) == 0 {
		return nil, usageError("--event is required: any of %s", strings.Join(names, ","))
	}
	for _, n := range f.events {
		e, ok := byName[strings.TrimSpace(n)]
		if !ok {
			return nil, usageError("--event %q: want any of %s", n, strings.Join(names, ","))
		}
		s.Events = append(s.Events, e)
	}
	if f.project != "" {
		s.Project = sdk.ProjectName(f.project)
	}
	if f.pendingAfter != 0 {
		s.PendingThreshold = durationpb.New(f.pendingAfter)
	}
	if f.idleAfter != 0 {
		s.IdleThreshold = durationpb.New(f.idleAfter)
	}
	switch {
	case (f.webhook == "") == (f.email == ""):
		return nil, usageError("give one of --webhook URL and --email ADDRESS")
	case f.webhook != "":
		s.Channel = &workloadv1.Subscription_Webhook{Webhook: &workloadv1.WebhookChannel{Url: f.webhook, Slack: f.slack}}
	default:
		mode, ok := smtpTLSModes[f.smtpTLS]
		if !ok {
			return nil, usageError("--smtp-tls %q: want starttls, implicit or none", f.smtpTLS)
		}
		s.Channel = &workloadv1.Subscription_Email{Email: &workloadv1.EmailChannel{To: f.email, SmtpServer: f.smtpServer,
			From: f.from, Tls: mode, Credential: f.smtpCredential}}
	}
	return s, nil
}

// notificationCommand manages the caller's subscriptions to events.
func notificationCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "notification", Aliases: []string{"notifications"},
		Short: "Notifications: your subscriptions to workload and cluster events, by webhook or email"}
	var f subscribeFlags
	names, _ := notificationEvents()
	subscribe := &cobra.Command{
		Use:   "subscribe [ID] --event EVENT,... (--webhook URL [--slack] | --email ADDRESS --smtp-server HOST:PORT --from ADDRESS)",
		Short: "Subscribe to events, delivered to a webhook or by email",
		Long: `Subscribe to events of the workloads you may view and, as an administrator, of
the cluster. Events: ` + strings.Join(names, ", ") + `.
pending-too-long needs --pending-after, idle-gpus --idle-after;
department-over-quota takes --over-quota-percent (0: any use over quota).

A webhook receives a JSON POST (the Notification: subscription, deliveryId,
event, resource, message, eventTime), or Slack's {"text": ...} with --slack.
Email goes over SMTP: STARTTLS by default, --smtp-tls implicit or none; with
--smtp-credential NAME (a generic credential with keys username and
password, which you must be allowed to change) it signs in, over TLS only.
A webhook or SMTP server on a loopback or private address is refused unless
the server allows it. Each notification is sent at least once, retried with
backoff; runway notification deliveries ID shows what was sent and why not.`,
		Example: `  runway notification subscribe --webhook https://hooks.example.com/runway --event failed,preempted -p team-a
  runway notification subscribe slack --webhook https://hooks.slack.com/services/T/B/X --slack --event failed,pending-too-long --pending-after 2h
  runway notification subscribe --email me@example.com --smtp-server smtp.example.com:587 --from runway@example.com \
      --smtp-credential credentials/smtp --event failed,completed`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.subscription()
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.NotificationService.CreateSubscription(ctx, &workloadv1.CreateSubscriptionRequest{Parent: "users/-", SubscriptionId: id, Subscription: s})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "subscription %q created\n", got.GetName())
				return nil
			})
		},
	}
	fl := subscribe.Flags()
	fl.StringSliceVar(&f.events, "event", nil, "events, comma-separated: "+strings.Join(names, ","))
	fl.StringVar(&f.webhook, "webhook", "", "POST each notification to this http(s) URL")
	fl.BoolVar(&f.slack, "slack", false, `with --webhook: send Slack's {"text": ...}`)
	fl.StringVar(&f.email, "email", "", "send each notification to this address")
	fl.StringVar(&f.smtpServer, "smtp-server", "", "with --email: the SMTP server, HOST:PORT")
	fl.StringVar(&f.from, "from", "", "with --email: the sender's address")
	fl.StringVar(&f.smtpTLS, "smtp-tls", "starttls", "with --email: starttls, implicit or none")
	fl.StringVar(&f.smtpCredential, "smtp-credential", "", "with --email: a generic credential (full name) holding username and password")
	fl.DurationVar(&f.pendingAfter, "pending-after", 0, "pending-too-long: how long a workload waits first (1m to 720h)")
	fl.DurationVar(&f.idleAfter, "idle-after", 0, "idle-gpus: how long a workload's GPUs are idle first (1m to 720h)")
	fl.Int32Var(&f.overQuotaPercent, "over-quota-percent", 0, "department-over-quota: by how much (in % of its quota) a department passes it first")
	projectFlag(subscribe, &f.project)
	subscribe.Flags().Lookup("project").Usage = "only events of this project (default: every project you may view)"

	var output string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List your subscriptions",
		Example: "  runway notification list\n  runway notification list -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				r, err := c.NotificationService.ListSubscriptions(ctx, &workloadv1.ListSubscriptionsRequest{Parent: "users/-"})
				if err != nil || output != formatTable {
					return orPrint(err, cmd.OutOrStdout(), output, r.GetSubscriptions())
				}
				t := newTable(cmd.OutOrStdout(), "Subscription", "Events", "Project", "Channel")
				for _, s := range r.GetSubscriptions() {
					var evs []string
					for _, e := range s.GetEvents() {
						evs = append(evs, notificationEvent(e))
					}
					t.row(sdk.ID(s.GetName()), strings.Join(evs, ","), orDefault(sdk.ID(s.GetProject()), "(all)"), channelText(s))
				}
				return t.flush()
			})
		},
	}
	outputFlag(list, &output)

	del := &cobra.Command{
		Use:     "delete ID",
		Short:   "Delete a subscription and its delivery record",
		Example: "  runway notification delete plain",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				name, err := subscriptionName(ctx, c, args[0])
				if err != nil {
					return err
				}
				if _, err := c.NotificationService.DeleteSubscription(ctx, &workloadv1.DeleteSubscriptionRequest{Name: name}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "subscription %q deleted\n", name)
				return nil
			})
		},
	}

	var dOutput string
	deliveries := &cobra.Command{
		Use:     "deliveries ID",
		Short:   "Show what a subscription sent, newest first: sent, failed and why, attempts",
		Example: "  runway notification deliveries plain\n  runway notification deliveries plain -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(dOutput); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				name, err := subscriptionName(ctx, c, args[0])
				if err != nil {
					return err
				}
				r, err := c.NotificationService.ListDeliveries(ctx, &workloadv1.ListDeliveriesRequest{Parent: name})
				if err != nil || dOutput != formatTable {
					return orPrint(err, cmd.OutOrStdout(), dOutput, r.GetDeliveries())
				}
				t := newTable(cmd.OutOrStdout(), "Time", "Event", "Resource", "State", "Attempts", "Last error")
				for _, d := range r.GetDeliveries() {
					n := d.GetNotification()
					t.row(d.GetCreateTime().AsTime().Local().Format("2006-01-02 15:04:05"), notificationEvent(n.GetEvent()),
						orDefault(n.GetResource(), "-"), strings.ToLower(strings.TrimPrefix(d.GetState().String(), "DELIVERY_STATE_")),
						fmt.Sprint(d.GetAttempts()), orDefault(d.GetLastError(), "-"))
				}
				return t.flush()
			})
		},
	}
	outputFlag(deliveries, &dOutput)
	cmd.AddCommand(subscribe, list, del, deliveries)
	return cmd
}

// subscriptionName is the caller's subscription id (or full name).
func subscriptionName(ctx context.Context, c *sdk.Client, id string) (string, error) {
	if strings.Contains(id, "/") {
		return id, nil
	}
	r, err := c.NotificationService.ListSubscriptions(ctx, &workloadv1.ListSubscriptionsRequest{Parent: "users/-"})
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(r.GetSubscriptions(), func(s *workloadv1.Subscription) bool { return sdk.ID(s.GetName()) == id })
	if i < 0 {
		return "", usageError("you hold no subscription %q (runway notification list shows yours)", id)
	}
	return r.GetSubscriptions()[i].GetName(), nil
}

// channelText is where a subscription sends, for the table.
func channelText(s *workloadv1.Subscription) string {
	if w := s.GetWebhook(); w != nil {
		if w.GetSlack() {
			return "slack " + w.GetUrl()
		}
		return "webhook " + w.GetUrl()
	}
	e := s.GetEmail()
	return "email " + e.GetTo() + " via " + e.GetSmtpServer()
}
