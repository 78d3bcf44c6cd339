package clusterproto

import "strings"

// ToolPath is where the tool proxy serves a workload's tool:
// /proxy/projects/{project}/workloads/{workload}/{tool}/. The workload
// service gives it in tool URLs, the node agent to a tool that takes its
// base URL, and the proxy serves it.
func ToolPath(workload, tool string) string { return "/proxy/" + workload + "/" + tool + "/" }

// ToolBaseURLEnv is the variable a pod of a tool that takes its base URL
// finds it in: RUNWAY_TOOL_{NAME}_BASE_URL, the name upper-cased, "-" as
// "_".
func ToolBaseURLEnv(tool string) string {
	return "RUNWAY_TOOL_" + strings.ToUpper(strings.ReplaceAll(tool, "-", "_")) + "_BASE_URL"
}

// EndpointPath is where the proxy serves an inference workload's endpoint:
// /serve/projects/{project}/inference/{workload}/.
func EndpointPath(workload string) string {
	return "/serve/" + strings.Replace(workload, "/workloads/", "/inference/", 1) + "/"
}
