package auth

const notificationSvc = "/runway.workload.v1.NotificationService/"

// The NotificationService's methods: a subscription is its owner's alone
// (the service refuses anyone else's name), so anyone who may view
// workloads somewhere may hold subscriptions; what each event needs beyond
// that (a project viewed, the cluster administered) the service asks
// Allowed when subscribing and again before each delivery.
func init() {
	somewhere := func(_ *Guard, r any) Target { return anywhere("subscriptions") }
	for _, name := range []string{"CreateSubscription", "GetSubscription", "ListSubscriptions", "DeleteSubscription", "ListDeliveries"} {
		// A subscription made or removed is a change of the caller's: audited.
		audit := name == "CreateSubscription" || name == "DeleteSubscription"
		methods[notificationSvc+name] = Method{Perm: perm(Workloads, View), Target: somewhere, Audit: audit}
	}
}
