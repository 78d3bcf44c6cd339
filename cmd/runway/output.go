package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	yaml "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Output formats of list and describe commands (-o).
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// outputFlag adds -o table|json|yaml.
func outputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "output", "o", formatTable, "output format: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(
		[]string{formatTable, formatJSON, formatYAML}, cobra.ShellCompDirectiveNoFileComp))
}

func checkFormat(f string) error {
	switch f {
	case formatTable, formatJSON, formatYAML:
		return nil
	}
	return usageError("unknown output format %q (want table, json or yaml)", f)
}

// marshalOptions print the REST API's JSON form: lowerCamel names, enums by
// name, zero values left out, as `curl` of the same resource shows.
var marshalOptions = protojson.MarshalOptions{Multiline: true, Indent: "  "}

// printMessages prints resources as JSON (one object for describe, an
// array for list) or YAML (a document, or a sequence).
func printMessages[M proto.Message](w io.Writer, format string, list bool, msgs ...M) error {
	var buf bytes.Buffer
	if list {
		buf.WriteString("[")
	}
	for i, m := range msgs {
		if i > 0 {
			buf.WriteString(",")
		}
		b, err := marshalOptions.Marshal(m)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	if list {
		buf.WriteString("]")
	}
	// protojson's spacing is deliberately unstable; re-indent for stable bytes.
	var out bytes.Buffer
	if err := json.Indent(&out, compact(buf.Bytes()), "", "  "); err != nil {
		return err
	}
	if format == formatJSON {
		out.WriteByte('\n')
		_, err := w.Write(out.Bytes())
		return err
	}
	return writeYAML(w, out.Bytes())
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

// writeYAML re-encodes JSON as block-style YAML, keeping the field order.
func writeYAML(w io.Writer, js []byte) error {
	var n yaml.Node
	if err := yaml.Unmarshal(js, &n); err != nil {
		return err
	}
	var block func(*yaml.Node)
	block = func(n *yaml.Node) {
		n.Style &^= yaml.FlowStyle
		if n.Kind == yaml.ScalarNode && n.Style&yaml.DoubleQuotedStyle != 0 {
			n.Style &^= yaml.DoubleQuotedStyle // quoted again only where YAML needs it
		}
		for _, c := range n.Content {
			block(c)
		}
	}
	block(&n)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	return enc.Close()
}

// table prints rows under a header, columns two spaces apart, as kubectl
// and the runai CLI do.
type table struct {
	tw     *tabwriter.Writer
	prefix string
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

// newIndentedTable is a table inside a describe section, two spaces in.
func newIndentedTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), prefix: "  "}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, t.prefix+strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }
