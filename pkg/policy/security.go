package policy

import (
	"fmt"
	"slices"
	"strings"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// Relaxations are the fields that loosen the container runtime's isolation
// (ContainerSecurity). Every other field is free unless a rule limits it;
// these are refused unless a rule allows them: the rule on the field must
// list the value among its options. So a relaxation is always a policy that
// an administrator of a scope wrote (an audited UpdatePolicy), never the
// submitter's choice alone.
var Relaxations = []string{"security.runAsRoot", "security.addCapabilities"}

// relaxation reports whether name (a JSON path) is one of Relaxations.
func relaxation(name string) bool { return slices.Contains(Relaxations, name) }

// capabilities are the Linux capabilities a policy may allow, by their
// names without CAP_ (capabilities(7)).
var capabilities = []string{
	"AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE", "CHOWN",
	"DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
	"LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE", "NET_BROADCAST",
	"NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYSLOG", "SYS_ADMIN", "SYS_BOOT",
	"SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO", "SYS_RESOURCE",
	"SYS_TIME", "SYS_TTY_CONFIG", "WAKE_ALARM",
}

// Capability reports whether name is a Linux capability as the spec and
// policies write it: upper case, without CAP_ ("NET_RAW"). "ALL" is none:
// capabilities are allowed one by one.
func Capability(name string) bool { return slices.Contains(capabilities, name) }

// checkRelaxationRule reports what is wrong with the options of a rule on a
// relaxation: they must be values the field can hold.
func checkRelaxationRule(at, name string, r *workloadv1.FieldRule) []Violation {
	var out []Violation
	for i, o := range r.GetOptions() {
		switch {
		case name == "security.runAsRoot" && o != "true" && o != "false":
			out = append(out, Violation{fmt.Sprintf("%s.options[%d]", at, i), "must be true or false"})
		case name == "security.addCapabilities" && !Capability(o):
			out = append(out, Violation{fmt.Sprintf("%s.options[%d]", at, i),
				fmt.Sprintf("must be a Linux capability without CAP_ (%q is not), one of %s", o, strings.Join(capabilities, ", "))})
		}
	}
	return out
}

// checkRelaxations reports each relaxation final sets that no rule of the
// effective policy allows (a rule with options; the options themselves are
// checked with the other rules).
func (e *Effective) checkRelaxations(prefix string, final *workloadv1.WorkloadSpec) []Violation {
	var out []Violation
	for _, name := range Relaxations {
		f := byName[name]
		if !f.has(final) {
			continue
		}
		if x := e.Fields[name]; x == nil || x.Rule == nil || len(x.Rule.GetOptions()) == 0 {
			out = append(out, Violation{prefix + f.proto, fmt.Sprintf(
				"may not be set: no policy of the project's branch allows it (a rule on field %q whose options list %s)",
				name, f.text(final))})
		}
	}
	return out
}
