// Package toleration reads, writes and checks the Kubernetes tolerations a
// node pool gives the pods Runway places in it (quota.v1.Toleration), in
// one place for the CLI, the quota service and the Kubernetes runtime, and
// without client-go. The written form is KEY[=VALUE][:EFFECT], as `kubectl
// taint` writes a taint: with a value it tolerates that value only, without
// one any value; without an effect every effect.
package toleration

import (
	"fmt"
	"regexp"
	"strings"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

// Max is how many tolerations a node pool may have.
const Max = 32

// The effects as Kubernetes spells them (core/v1 TaintEffect).
var effects = map[quotav1.TaintEffect]string{
	quotav1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE:        "NoSchedule",
	quotav1.TaintEffect_TAINT_EFFECT_PREFER_NO_SCHEDULE: "PreferNoSchedule",
	quotav1.TaintEffect_TAINT_EFFECT_NO_EXECUTE:         "NoExecute",
}

// Effect is the Kubernetes spelling of an effect; "" for every effect.
func Effect(e quotav1.TaintEffect) string { return effects[e] }

// Parse reads KEY[=VALUE][:EFFECT] and checks it (Check).
func Parse(s string) (*quotav1.Toleration, error) {
	kv, effect, hasEffect := strings.Cut(s, ":")
	key, value, hasValue := strings.Cut(kv, "=")
	t := &quotav1.Toleration{Key: key, Value: value, Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EXISTS}
	if hasValue {
		t.Operator = quotav1.TolerationOperator_TOLERATION_OPERATOR_EQUAL
	}
	if hasEffect {
		for e, name := range effects {
			if name == effect {
				t.Effect = e
			}
		}
		if t.Effect == quotav1.TaintEffect_TAINT_EFFECT_UNSPECIFIED {
			return nil, fmt.Errorf("toleration %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
		}
	}
	if field, why := Check(t); field != "" {
		return nil, fmt.Errorf("toleration %q (KEY[=VALUE][:EFFECT]): the %s %s", s, field, why)
	}
	return t, nil
}

// String writes t as Parse reads it.
func String(t *quotav1.Toleration) string {
	s := t.GetKey()
	if Equal(t) {
		s += "=" + t.GetValue()
	}
	if e := Effect(t.GetEffect()); e != "" {
		s += ":" + e
	}
	return s
}

// Equal says whether t tolerates only its value (operator EQUAL, or
// unspecified with a value).
func Equal(t *quotav1.Toleration) bool {
	op := t.GetOperator()
	return op == quotav1.TolerationOperator_TOLERATION_OPERATOR_EQUAL ||
		op == quotav1.TolerationOperator_TOLERATION_OPERATOR_UNSPECIFIED && t.GetValue() != ""
}

var (
	// nameRule is a qualified name's name part and a label value (without
	// the length, at most 63).
	nameRule = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// prefixRule is a DNS subdomain (at most 253).
	prefixRule = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Check names t's first bad field ("key", "value", "operator" or
// "effect") and why; "" when t is good.
func Check(t *quotav1.Toleration) (field, why string) {
	key := t.GetKey()
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	switch {
	case key == "":
		return "key", "is required"
	case len(name) > 63 || !nameRule.MatchString(name) || hasPrefix && (len(prefix) > 253 || !prefixRule.MatchString(prefix)):
		return "key", "must be a Kubernetes qualified name: [DNS-subdomain/]name, the name 1-63 characters of [A-Za-z0-9-_.] starting and ending with a letter or digit"
	}
	if _, ok := quotav1.TolerationOperator_name[int32(t.GetOperator())]; !ok {
		return "operator", "must be TOLERATION_OPERATOR_EXISTS or TOLERATION_OPERATOR_EQUAL"
	}
	v := t.GetValue()
	switch {
	case t.GetOperator() == quotav1.TolerationOperator_TOLERATION_OPERATOR_EXISTS && v != "":
		return "value", "must be empty with TOLERATION_OPERATOR_EXISTS"
	case v != "" && (len(v) > 63 || !nameRule.MatchString(v)):
		return "value", "must be a Kubernetes label value: at most 63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit"
	}
	if _, ok := quotav1.TaintEffect_name[int32(t.GetEffect())]; !ok {
		return "effect", "must be TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_PREFER_NO_SCHEDULE or TAINT_EFFECT_NO_EXECUTE (unspecified: every effect)"
	}
	return "", ""
}
