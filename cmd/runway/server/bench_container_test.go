package server_test

import (
	"fmt"
	"testing"

	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
)

// BenchmarkSubmitEndToEndContainers is BenchmarkSubmitEndToEnd with the
// agents' pods as containers on a real podman (podmantest), in a smaller
// shape, since each pod is a container of its own: 100 trainings on 4
// agents, and the same shape with host processes to compare.
func BenchmarkSubmitEndToEndContainers(b *testing.B) {
	submits, nodes := benchSubmits, benchNodes
	defer func() { benchSubmits, benchNodes, benchEngine, benchImage = submits, nodes, "", "busybox" }()
	benchSubmits, benchNodes = 100, 4
	b.Run(fmt.Sprintf("agents=%d/process", benchNodes), func(b *testing.B) { benchEndToEnd(b, true) })
	e := podmantest.Start(b)
	benchEngine, benchImage = e.Host, podmantest.Image
	b.Run(fmt.Sprintf("agents=%d/container", benchNodes), func(b *testing.B) { benchEndToEnd(b, true) })
}
