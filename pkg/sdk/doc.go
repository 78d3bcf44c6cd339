// Package sdk is Runway's Go client: Dial a Runway server (address and token
// from the environment or the config file), call the services through the
// generated clients it holds, walk List calls page by page with iterators,
// and branch on errors by their reason code.
//
//	c, err := sdk.Dial(ctx, sdk.FromEnvironment())
//	w, err := c.SubmitWorkload(ctx, "team-a", "a1", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, spec)
//	for w, err := range c.Workloads(ctx, sdk.AllProjects, "") { ... }
//	if sdk.IsNotFound(err) { ... }
//
// It depends only on the generated code (gen/go) and gRPC, so programs that
// import it pull in nothing of the server.
package sdk
