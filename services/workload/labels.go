package workload

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Labels and annotations are bounded: a workload is read by every list and
// watch of its project.
const (
	MaxLabels          = 64
	MaxAnnotationBytes = 256 << 10
)

var (
	labelName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
	dnsLabel  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// reservedPrefixes are the platform's own: a user's label must not pass
	// for one of Runway's marks on a pod or container.
	reservedPrefixes = []string{"runway.dev", "runway.io", "run.ai", "kubernetes.io", "k8s.io", "nvidia.com"}
)

// validateLabels checks labels (values limited as Kubernetes' label values)
// or annotations (values free, bounded in all) at field.
func validateLabels(v *violations, field string, m map[string]string, annotations bool) {
	if len(m) > MaxLabels {
		v.add(field, fmt.Sprintf("has %d entries; at most %d", len(m), MaxLabels))
		return
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		at := fmt.Sprintf("%s[%s]", field, k)
		if why := labelKeyProblem(k); why != "" {
			v.add(at, why)
		}
		total += len(k) + len(m[k])
		if !annotations && !labelValue.MatchString(m[k]) {
			v.add(at, "value must be 0-63 characters of [A-Za-z0-9._-], starting and ending with a letter or digit")
		}
	}
	if annotations && total > MaxAnnotationBytes {
		v.add(field, fmt.Sprintf("holds %d bytes of keys and values; at most %d", total, MaxAnnotationBytes))
	}
}

// labelKeyProblem says what is wrong with a label or annotation key, or "".
func labelKeyProblem(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		prefix, name = "", k
	}
	if !labelName.MatchString(name) {
		return "key must be [prefix/]name: the name 1-63 characters of [A-Za-z0-9._-], starting and ending with a letter or digit"
	}
	if !hasPrefix {
		if strings.HasPrefix(name, "io.runway.") {
			return "key io.runway.* is the platform's (its containers' labels)"
		}
		return ""
	}
	parts := strings.Split(prefix, ".")
	if len(prefix) > 253 || slices.ContainsFunc(parts, func(p string) bool { return !dnsLabel.MatchString(p) }) {
		return "key prefix must be a DNS subdomain, such as example.com"
	}
	for _, r := range reservedPrefixes {
		if prefix == r || strings.HasSuffix(prefix, "."+r) {
			return fmt.Sprintf("key prefix %s is the platform's", prefix)
		}
	}
	return ""
}
