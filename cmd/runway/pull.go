package main

import (
	"strings"

	"github.com/spf13/pflag"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// pullFlags defines --pull-policy and --registry-credential, shared by
// environments and submits.
func pullFlags(fl *pflag.FlagSet, policy, credential *string) {
	fl.StringVar(policy, "pull-policy", "", "when the image is pulled: always, if-not-present (the default) or never")
	fl.StringVar(credential, "registry-credential", "", "a registry credential of the image's registry to pull it with")
}

// pullPolicy parses a --pull-policy value ("" is unset).
func pullPolicy(s string) (workloadv1.ImagePullPolicy, error) {
	if s == "" {
		return workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_UNSPECIFIED, nil
	}
	v, ok := workloadv1.ImagePullPolicy_value["IMAGE_PULL_POLICY_"+strings.ToUpper(strings.ReplaceAll(s, "-", "_"))]
	if !ok || v == 0 {
		return 0, usageError("--pull-policy %q: want always, if-not-present or never", s)
	}
	return workloadv1.ImagePullPolicy(v), nil
}

// pullPolicyName is the CLI's name of a policy ("-" when unset).
func pullPolicyName(p workloadv1.ImagePullPolicy) string {
	if p == workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_UNSPECIFIED {
		return "-"
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(p.String(), "IMAGE_PULL_POLICY_")), "_", "-")
}
