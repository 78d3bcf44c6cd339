package quota_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops its servers, clients and embedded etcd; goleak checks
// that nothing is left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
