//go:build !cgo

package nvidia

import (
	"errors"

	"github.com/runwayhq/runway/pkg/gpu"
)

// Load fails: NVML needs cgo, and this binary was built without it.
func Load() (b gpu.Backend, close func(), err error) {
	return nil, nil, errors.New("nvml: this binary was built without cgo, which NVML needs")
}
