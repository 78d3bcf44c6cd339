package gpumetrics

import "time"

// Window is the unit of GPU idle time, as the product defines it.
const Window = 30 * time.Second

// Idle is one pod's GPU idle time: for each window (30 s) with zero
// utilisation it grows by the window, and any utilisation in a window
// resets it to 0. Windows are counted from the time given to NewIdle. It
// is pure (the caller passes the time) and not safe for concurrent use.
type Idle struct {
	window time.Duration
	start  time.Time // of the current window
	busy   bool      // the current window has seen utilisation
	idle   time.Duration
}

// NewIdle starts counting at start with no idle time, in windows of window
// (Window when 0; only tests shorten it).
func NewIdle(start time.Time, window time.Duration) *Idle {
	if window <= 0 {
		window = Window
	}
	return &Idle{window: window, start: start}
}

// Observe records a sample: utilisation u (0 to 1) over the time up to
// now since the previous sample. It returns the idle time and whether it
// changed (grew by a window, or reset). A sample whose period spans
// several windows counts in each of them.
func (t *Idle) Observe(now time.Time, u float64) (time.Duration, bool) {
	changed := false
	if u > 0 {
		t.busy = true
	}
	for end := t.start.Add(t.window); !now.Before(end); end = t.start.Add(t.window) {
		if t.busy {
			changed = changed || t.idle != 0
			t.idle = 0
		} else {
			t.idle += t.window
			changed = true
		}
		t.start = end
		t.busy = u > 0 && now.After(end)
	}
	return t.idle, changed
}

// Value is the idle time as of the last window closed.
func (t *Idle) Value() time.Duration { return t.idle }
