package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	yaml "go.yaml.in/yaml/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// The policy editor's YAML is what `runway policy get` prints: the
// Policy's JSON form (the REST API's names) as YAML, its name saying the
// scope and type. `runway policy apply -f FILE` reads it back. Every error
// names the line of the file it is about: YAML's own, an unknown field or a
// value of the wrong kind (found here, walking the document against the
// Policy's descriptor), and the server's INVALID_ARGUMENT violations, whose
// field paths are looked up in the document.

// policyDoc is a policy read from YAML with the document it came from.
type policyDoc struct {
	file   string
	root   *yaml.Node // a mapping
	policy *workloadv1.Policy
}

// readPolicyDoc reads and checks a policy document ("-": stdin).
func readPolicyDoc(stdin io.Reader, file string) (*policyDoc, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	d := &policyDoc{file: file, root: &yaml.Node{Kind: yaml.MappingNode, Line: 1}}
	if len(doc.Content) > 0 {
		d.root = doc.Content[0]
	}
	p := &workloadv1.Policy{}
	if err := d.check(d.root, p.ProtoReflect().Descriptor(), ""); err != nil {
		return nil, err
	}
	var v any
	if err := d.root.Decode(&v); err != nil {
		return nil, d.at(d.root, "", err.Error())
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, d.at(d.root, "", err.Error())
	}
	if err := protojson.Unmarshal(js, p); err != nil {
		return nil, d.at(d.root, "", "not a policy: "+err.Error())
	}
	d.policy = p
	return d, nil
}

// loadPolicyDoc is readPolicyDoc for a command's -f: a file that cannot be
// read is a usage error; a bad document's error names its line.
func loadPolicyDoc(cmd *cobra.Command, file string) (*policyDoc, error) {
	d, err := readPolicyDoc(cmd.InOrStdin(), file)
	var ee *exitError
	if err != nil && !errors.As(err, &ee) {
		return nil, usageError("-f %s: %v", file, err)
	}
	return d, err
}

// at is an error about node n (field path, when known): "FILE:LINE: ...".
func (d *policyDoc) at(n *yaml.Node, path, msg string) error {
	if path != "" {
		msg = path + ": " + msg
	}
	return &exitError{code: 2, msg: fmt.Sprintf("%s:%d: %s", d.file, n.Line, msg)}
}

// check walks a mapping against message md: every key a field, every value
// of the field's kind.
func (d *policyDoc) check(n *yaml.Node, md protoreflect.MessageDescriptor, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.at(n, path, "want a mapping of "+string(md.Name())+" fields")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		fd := md.Fields().ByJSONName(key.Value)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(key.Value))
		}
		at := strings.TrimPrefix(path+"."+key.Value, ".")
		if fd == nil {
			return d.at(key, at, "unknown field of "+string(md.Name()))
		}
		if err := d.checkValue(val, md, fd, at); err != nil {
			return err
		}
	}
	return nil
}

// checkValue checks one field's value: messages walked, lists and maps
// item by item, a scalar (or a well-known type such as a duration) read as
// protojson reads it.
func (d *policyDoc) checkValue(val *yaml.Node, md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, path string) error {
	walk := func(n *yaml.Node, at string) error {
		if fd.Message() != nil && !strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
			return d.check(n, fd.Message(), at)
		}
		return d.checkScalar(n, md, fd, at)
	}
	switch {
	case fd.IsMap():
		if val.Kind != yaml.MappingNode {
			return d.at(val, path, "want a mapping")
		}
		for i := 0; i+1 < len(val.Content); i += 2 {
			v := val.Content[i+1]
			at := fmt.Sprintf("%s[%q]", path, val.Content[i].Value)
			if fd.MapValue().Message() != nil {
				if err := d.check(v, fd.MapValue().Message(), at); err != nil {
					return err
				}
			} else if err := d.checkScalar(v, md, fd, at); err != nil {
				return err
			}
		}
		return nil
	case fd.IsList():
		if val.Kind != yaml.SequenceNode {
			return d.at(val, path, "want a list")
		}
		for i, item := range val.Content {
			if err := walk(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(val, path)
}

// checkScalar reads one value of field fd as protojson would, alone in a
// message of md, so that a wrong kind of value is found at its line.
func (d *policyDoc) checkScalar(n *yaml.Node, md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, path string) error {
	var v any
	if err := n.Decode(&v); err != nil {
		return d.at(n, path, err.Error())
	}
	switch {
	case fd.IsList():
		v = []any{v}
	case fd.IsMap():
		v = map[string]any{"k": v}
	}
	js, err := json.Marshal(map[string]any{fd.JSONName(): v})
	if err != nil {
		return d.at(n, path, err.Error())
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		return err
	}
	if err := protojson.Unmarshal(js, mt.New().Interface()); err != nil {
		return d.at(n, path, fmt.Sprintf("not a valid %s value (%v)", fd.Kind(), n.Value))
	}
	return nil
}

// line is the line of the document a request field path names
// ("policy.rules[\"gpu.devices\"].max", "policy.defaults.milli_cpu"): the
// deepest part of it the document has, else the document's first line.
func (d *policyDoc) line(path string) int {
	n := d.root
	line := n.Line
	for _, seg := range fieldPath(strings.TrimPrefix(path, "policy.")) {
		next := child(n, seg)
		if next == nil {
			break
		}
		n, line = next.val, next.key.Line
	}
	return line
}

type yamlEntry struct{ key, val *yaml.Node }

// child is the entry of mapping n that seg names, by its JSON or proto name.
func child(n *yaml.Node, seg string) *yamlEntry {
	if n.Kind == yaml.SequenceNode {
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
			return &yamlEntry{n.Content[i], n.Content[i]}
		}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k == seg || k == lowerCamel(seg) {
			return &yamlEntry{n.Content[i], n.Content[i+1]}
		}
	}
	return nil
}

// fieldPath splits an AIP-193 field path into its parts: names, map keys
// (`["gpu.devices"]`) and indexes (`[0]`).
func fieldPath(path string) []string {
	var out []string
	for path != "" {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(out, path)
			}
			inner := path[1:end]
			if strings.HasPrefix(inner, `"`) {
				// A quoted key may hold ']': find the closing quote.
				if q, err := strconv.QuotedPrefix(inner); err == nil {
					end = 1 + len(q)
					inner = q
				}
				if s, err := strconv.Unquote(inner); err == nil {
					inner = s
				}
			}
			out = append(out, inner)
			path = path[min(end+1, len(path)):]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			out = append(out, path[:end])
			path = path[end:]
		}
	}
	return out
}

// lowerCamel is a proto field name's JSON name ("milli_cpu" → "milliCpu").
func lowerCamel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// explain rewrites the server's INVALID_ARGUMENT answer into one line per
// violation, each with the line of the document it names; other errors
// pass through.
func (d *policyDoc) explain(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var lines []string
	for _, det := range st.Details() {
		if br, ok := det.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				lines = append(lines, fmt.Sprintf("%s:%d: %s: %s", d.file, d.line(v.GetField()), strings.TrimPrefix(v.GetField(), "policy."), v.GetDescription()))
			}
		}
	}
	if len(lines) == 0 {
		return err
	}
	return &exitError{code: 1, msg: strings.Join(lines, "\n") + " [" + sdk.Reason(err) + "]"}
}

func policyApplyCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Set a policy from the YAML `policy get` prints (its name says the scope and type)",
		Long: `Create or replace the policy the document names, as printed by
runway policy get -o yaml:

  name: departments/research/policies/training
  defaults:
    milliCpu: 2000
    gpu: {devices: 1}
  rules:
    gpu.devices: {max: 2}

Output-only fields (scope, workloadType, setBy, updateTime) are ignored; an
etag, when there, must still be the policy's (a change made since the get is
not overwritten). Every error names its line of the file.`,
		Example: "  runway policy get --type training --department research > p.yaml\n  runway policy apply -f p.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := loadPolicyDoc(cmd, file)
			if err != nil {
				return err
			}
			if d.policy.GetName() == "" {
				return d.at(d.root, "", "name is required: policies/{type}, departments/{department}/policies/{type} or projects/{project}/policies/{type}")
			}
			p := proto.Clone(d.policy).(*workloadv1.Policy)
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.GovernanceService.UpdatePolicy(ctx, &workloadv1.UpdatePolicyRequest{Policy: p, AllowMissing: true})
				if err != nil {
					return d.explain(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "policy %q applied\n", got.GetName())
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the policy in YAML (- for stdin; required)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func policyListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List every policy you may view, with its scope and type",
		Example: "  runway policy list\n  runway policy list -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				var ps []*workloadv1.Policy
				req := &workloadv1.ListPoliciesRequest{PageSize: 1000}
				for {
					resp, err := c.GovernanceService.ListPolicies(ctx, req)
					if err != nil {
						return err
					}
					ps = append(ps, resp.GetPolicies()...)
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
				}
				w := cmd.OutOrStdout()
				if output != formatTable {
					return printMessages(w, output, true, ps...)
				}
				t := newTable(w, "Policy", "Scope", "Type", "Defaults", "Rules", "Set By")
				for _, p := range ps {
					t.row(p.GetName(), p.GetScope(), typeName(p.GetWorkloadType()), fmt.Sprint(defaultCount(p)),
						fmt.Sprint(len(p.GetRules())), orDefault(p.GetSetBy(), "-"))
				}
				return t.flush()
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// defaultCount is how many fields a policy's defaults set.
func defaultCount(p *workloadv1.Policy) int {
	n := 0
	p.GetDefaults().ProtoReflect().Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool { n++; return true })
	return n
}
