package apierr

import (
	"fmt"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
)

// OneUserRuntime reports that the node runtime runs every pod as one
// account, so only principal's own workloads may run (`runway dev` with the
// process runtime and no root): PERMISSION_DENIED, metadata {"permission",
// "resource"}; hint says how to run more users' pods.
func OneUserRuntime(caller, principal, hint string) *Error {
	msg := fmt.Sprintf("Pods here run as one account with no isolation, so only %q may submit workloads, not %q; %s.", principal, caller, hint)
	return newError(commonv1.ErrorReason_PERMISSION_DENIED, msg, "permission", "workloads.create", "resource", caller)
}
