package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// toolTypes are the --tool types by their CLI names.
var toolTypes = map[string]workloadv1.ToolType{
	"jupyter": workloadv1.ToolType_TOOL_TYPE_JUPYTER, "vscode": workloadv1.ToolType_TOOL_TYPE_VSCODE,
	"tensorboard": workloadv1.ToolType_TOOL_TYPE_TENSORBOARD, "custom": workloadv1.ToolType_TOOL_TYPE_CUSTOM,
}

const toolUsage = "NAME=TYPE:PORT[/PATH][,base-url] (TYPE jupyter, vscode, tensorboard or custom)"

// parseTool reads one --tool: NAME=TYPE:PORT, then optionally the path the
// tool serves under on the pod (/PATH) and ",base-url" when the tool is
// told the proxy path it is served under.
func parseTool(s string) (*workloadv1.Tool, error) {
	name, rest, ok := strings.Cut(s, "=")
	spec, baseURL := strings.CutSuffix(rest, ",base-url")
	typ, port, ok2 := strings.Cut(spec, ":")
	if !ok || !ok2 || name == "" {
		return nil, usageError("--tool %q: want %s", s, toolUsage)
	}
	t, known := toolTypes[typ]
	if !known {
		return nil, usageError("--tool %q: type %q: want jupyter, vscode, tensorboard or custom", s, typ)
	}
	path := ""
	if i := strings.Index(port, "/"); i >= 0 {
		port, path = port[:i], port[i:]
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, usageError("--tool %q: port %q is not a number", s, port)
	}
	return &workloadv1.Tool{Name: name, Type: t, Port: int32(n), PathPrefix: path, BaseUrl: baseURL}, nil
}

// toolTypeName is a tool type's CLI name.
func toolTypeName(t workloadv1.ToolType) string {
	for name, v := range toolTypes {
		if v == t {
			return name
		}
	}
	return "-"
}

// describeTools prints a workload's tools, with their URLs while it runs.
func describeTools(out io.Writer, w *workloadv1.Workload) error {
	if len(w.GetSpec().GetTools()) == 0 {
		return nil
	}
	urls := map[string]string{}
	for _, ts := range w.GetStatus().GetTools() {
		urls[ts.GetName()] = ts.GetUrl()
	}
	fmt.Fprintln(out, "\nTools:")
	t := newIndentedTable(out, "Name", "Type", "Port", "URL")
	for _, tl := range w.GetSpec().GetTools() {
		t.row(tl.GetName(), toolTypeName(tl.GetType()), strconv.Itoa(int(tl.GetPort())), orDefault(urls[tl.GetName()], "- (not running)"))
	}
	return t.flush()
}

// serveFlags are inference submit's endpoint flags.
type serveFlags struct {
	port   int32
	access string
}

func (f *serveFlags) add(fl *pflag.FlagSet) {
	fl.Int32Var(&f.port, "serving-port", 0, "the container port the model server listens on: its endpoint is the tool proxy's /serve/projects/P/inference/NAME/")
	fl.StringVar(&f.access, "serving-access", "project", "who may call the endpoint: authenticated (any token of the account), project (who may view the project's workloads) or public (anyone; account administrators only)")
}

var servingAccess = map[string]workloadv1.ServingAccess{
	"authenticated": workloadv1.ServingAccess_SERVING_ACCESS_AUTHENTICATED,
	"project":       workloadv1.ServingAccess_SERVING_ACCESS_PROJECT,
	"public":        workloadv1.ServingAccess_SERVING_ACCESS_PUBLIC,
}

// spec is the endpoint the flags ask for; nil without --serving-port.
func (f *serveFlags) spec() (*workloadv1.Serving, error) {
	if f.port == 0 {
		return nil, nil
	}
	a, ok := servingAccess[f.access]
	if !ok {
		return nil, usageError("--serving-access %q: want authenticated, project or public", f.access)
	}
	return &workloadv1.Serving{Port: f.port, Access: a}, nil
}
