package grpcserver_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops its servers and clients; goleak checks nothing is left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
