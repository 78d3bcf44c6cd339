package scenario

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// ParseDuration parses a Go duration ("90s", "1h30m") that may also use a
// day unit ("7d", "1d12h", "1.5d"): scenario files replay traces that span
// days, and "168h" is harder to read than "7d". A day is always 24 hours:
// the virtual clock has no calendar.
func ParseDuration(s string) (time.Duration, error) {
	body, neg := strings.CutPrefix(s, "-")
	if !neg {
		body = strings.TrimPrefix(body, "+")
	}
	if body == "0" {
		return 0, nil
	}
	if body == "" {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	total, err := sumDuration(body)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %v", s, err)
	}
	if neg {
		total = -total
	}
	return total, nil
}

// sumDuration adds the day terms of s to the Go duration made of the other
// terms, so that everything but "d" keeps time.ParseDuration's meaning.
func sumDuration(s string) (time.Duration, error) {
	var days time.Duration
	var rest strings.Builder
	for s != "" {
		num, unit, tail := splitTerm(s)
		if num == "" || unit == "" {
			return 0, fmt.Errorf("want a number followed by a unit (d, h, m, s, ms, us, ns)")
		}
		s = tail
		if unit != "d" {
			rest.WriteString(num + unit)
			continue
		}
		d, err := time.ParseDuration(num + "h")
		if err != nil || d > math.MaxInt64/24 || days > math.MaxInt64-24*d {
			return 0, fmt.Errorf("bad or too large day count %q", num)
		}
		days += 24 * d
	}
	if rest.Len() == 0 {
		return days, nil
	}
	d, err := time.ParseDuration(rest.String())
	if err != nil {
		return 0, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "time: "))
	}
	if d > math.MaxInt64-days {
		return 0, fmt.Errorf("too large")
	}
	return days + d, nil
}

// splitTerm splits s into its leading number, the unit after it and the rest.
func splitTerm(s string) (num, unit, rest string) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		return s, "", ""
	}
	j := strings.IndexAny(s[i:], "0123456789.")
	if j < 0 {
		return s[:i], s[i:], ""
	}
	return s[:i], s[i : i+j], s[i+j:]
}

// FormatClock renders a virtual time as the runner's output does: "0h0m4s",
// "170h3m0s". Hours are not folded into days so that times stay comparable
// as text across a run; sub-second parts are dropped (truncated), because
// the clock advances in whole cycles.
func FormatClock(d time.Duration) string {
	secs := int64(d / time.Second)
	sign := ""
	if secs < 0 {
		sign, secs = "-", -secs
	}
	return fmt.Sprintf("%s%dh%dm%ds", sign, secs/3600, secs/60%60, secs%60)
}
