package toolproxy

import (
	"crypto/sha256"
	"sync"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// maxAnswers bounds the answers kept: past it they are all dropped (each is
// asked again, within Recheck anyway), so that callers cannot grow it.
const maxAnswers = 10_000

// answers are the workload service's recent yeses (ResolveTool), by
// caller's credential and tool: only a yes is kept, for Recheck, so a
// refusal or a revoked access is seen within it.
type answers struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]answer
}

type answer struct {
	to  *workloadv1.ToolTarget
	exp time.Time
}

func newAnswers() *answers { return &answers{m: map[[sha256.Size]byte]answer{}} }

// answerKey keys a credential (hashed: the map holds no token) and a tool.
func answerKey(cred string, t target) [sha256.Size]byte {
	kind := "tool"
	if t.serve {
		kind = "serve"
	}
	return sha256.Sum256([]byte(kind + "\x00" + cred + "\x00" + t.workload + "\x00" + t.tool))
}

func (a *answers) get(k [sha256.Size]byte) (*workloadv1.ToolTarget, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[k]
	if !ok || time.Now().After(e.exp) {
		delete(a.m, k)
		return nil, false
	}
	return e.to, true
}

func (a *answers) put(k [sha256.Size]byte, to *workloadv1.ToolTarget, exp time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) >= maxAnswers {
		clear(a.m)
	}
	a.m[k] = answer{to: to, exp: exp}
}
