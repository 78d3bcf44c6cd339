package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The policy YAML's own checks name the line: a YAML syntax error, an
// unknown field, a value of the wrong kind (in defaults and in a rule).
func TestPolicyDoc_ErrorsNameTheLine(t *testing.T) {
	for name, tc := range map[string]struct {
		doc, want string
	}{
		"syntax":        {"name: policies/training\ndefaults:\n  milliCpu: 1\n gpu: 2\n", "p.yaml: line 3: did not find expected key"},
		"unknown field": {"name: policies/training\ndefaults:\n  milliCpu: 2000\n  gpus: 2\n", "p.yaml:4: defaults.gpus: unknown field of WorkloadSpec"},
		"wrong kind":    {"name: policies/training\ndefaults:\n  milliCpu: lots\n", "p.yaml:3: defaults.milliCpu: not a valid int64 value (lots)"},
		"rule":          {"name: policies/training\nrules:\n  gpu.devices:\n    max: two\n", `p.yaml:4: rules["gpu.devices"].max: not a valid double value (two)`},
		"rule key":      {"name: policies/training\nrules:\n  gpu.devices:\n    maximum: 2\n", `p.yaml:4: rules["gpu.devices"].maximum: unknown field of FieldRule`},
		"not a mapping": {"- a\n- b\n", "p.yaml:1: want a mapping of Policy fields"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readPolicyDoc(strings.NewReader(tc.doc), "-")
			if err == nil || !strings.Contains(strings.Replace(err.Error(), "-:", "p.yaml:", 1), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A good document reads into the policy, and the server's field paths are
// found at their lines (JSON or proto names, map keys, nested fields).
func TestPolicyDoc_LineOfAServerField(t *testing.T) {
	doc := `name: departments/research/policies/training
etag: "12"
defaults:
  milliCpu: 2000
  gpu:
    devices: 1
rules:
  gpu.devices:
    min: 4
    max: 2
  image: {options: [pytorch]}
`
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := readPolicyDoc(nil, file)
	if err != nil {
		t.Fatal(err)
	}
	if d.policy.GetName() != "departments/research/policies/training" || d.policy.GetEtag() != "12" ||
		d.policy.GetDefaults().GetMilliCpu() != 2000 || d.policy.GetRules()["gpu.devices"].GetMax() != 2 {
		t.Fatalf("policy %v", d.policy)
	}
	for path, want := range map[string]int{
		`policy.rules["gpu.devices"].max`: 10,
		`policy.rules["gpu.devices"]`:     8,
		`policy.rules["image"].options`:   11,
		"policy.defaults.milli_cpu":       4,
		"policy.defaults.gpu.devices":     6,
		"policy.name":                     1,
		`policy.rules["nodeType"]`:        7, // not in the file: the deepest part that is
	} {
		if got := d.line(path); got != want {
			t.Errorf("line(%s) = %d, want %d", path, got, want)
		}
	}
}
