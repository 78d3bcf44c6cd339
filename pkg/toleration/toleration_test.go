package toleration

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

func TestParseAndString(t *testing.T) {
	for s, want := range map[string]*quotav1.Toleration{
		"dedicated": {Key: "dedicated", Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EXISTS},
		"dedicated=ml:NoSchedule": {Key: "dedicated", Value: "ml", Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EQUAL,
			Effect: quotav1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE},
		"nvidia.com/gpu:NoExecute": {Key: "nvidia.com/gpu", Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EXISTS,
			Effect: quotav1.TaintEffect_TAINT_EFFECT_NO_EXECUTE},
		"k=:PreferNoSchedule": {Key: "k", Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EQUAL,
			Effect: quotav1.TaintEffect_TAINT_EFFECT_PREFER_NO_SCHEDULE},
	} {
		got, err := Parse(s)
		if err != nil || !proto.Equal(got, want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
			continue
		}
		if back := String(got); back != s {
			t.Errorf("String(Parse(%q)) = %q", s, back)
		}
	}
	for s, want := range map[string]string{
		"":                             "the key is required",
		"=v":                           "the key is required",
		"a b":                          "qualified name",
		"-dedicated":                   "qualified name",
		"Bad.Prefix/k":                 "qualified name",
		strings.Repeat("k", 64):        "qualified name",
		"k=" + strings.Repeat("v", 64): "label value",
		"k=a b":                        "label value",
		"k:NoWhere":                    `effect "NoWhere"`,
		"k:":                           `effect ""`,
	} {
		if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", s, err, want)
		}
	}
}

func TestCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		t     *quotav1.Toleration
		field string
	}{
		"good":                  {&quotav1.Toleration{Key: "a.b/c", Value: "v"}, ""},
		"exists with a value":   {&quotav1.Toleration{Key: "k", Value: "v", Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EXISTS}, "value"},
		"unknown operator":      {&quotav1.Toleration{Key: "k", Operator: 9}, "operator"},
		"unknown effect":        {&quotav1.Toleration{Key: "k", Effect: 9}, "effect"},
		"unspecified, no value": {&quotav1.Toleration{Key: "k"}, ""},
	} {
		if field, _ := Check(tc.t); field != tc.field {
			t.Errorf("%s: Check = %q, want %q", name, field, tc.field)
		}
	}
	if !Equal(&quotav1.Toleration{Key: "k", Value: "v"}) || Equal(&quotav1.Toleration{Key: "k"}) {
		t.Error("Equal: unspecified means EQUAL with a value, EXISTS without")
	}
}
