package scenario

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	cases := map[string]struct {
		in   string
		want time.Duration
	}{
		"a Go duration is unchanged":      {"1h30m", 90 * time.Minute},
		"sub-second units work":           {"250ms", 250 * time.Millisecond},
		"a day is 24 hours":               {"7d", 7 * 24 * time.Hour},
		"days combine with other units":   {"1d12h", 36 * time.Hour},
		"days may come after other units": {"12h1d", 36 * time.Hour},
		"a fractional day":                {"1.5d", 36 * time.Hour},
		"a bare zero needs no unit":       {"0", 0},
		"a sign applies to the whole":     {"-1d1h", -25 * time.Hour},
		"a plus sign is allowed":          {"+2m", 2 * time.Minute},
		"the largest day count that fits": {"106751d", 106751 * 24 * time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseDurationErrors(t *testing.T) {
	for name, in := range map[string]string{
		"an empty string":          "",
		"a lone sign":              "-",
		"a number without a unit":  "30",
		"a unit without a number":  "d",
		"an unknown unit":          "3w",
		"a trailing number":        "1d3",
		"too many days":            "106752d",
		"days plus hours overflow": "106751d24h",
		"a double sign":            "--1s",
		"a space inside":           "1d 2h",
	} {
		t.Run(name, func(t *testing.T) {
			if d, err := ParseDuration(in); err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an error", in, d)
			} else if !strings.Contains(err.Error(), "invalid duration") {
				t.Errorf("error %q does not say invalid duration", err)
			}
		})
	}
}

func TestFormatClock(t *testing.T) {
	cases := map[string]struct {
		in   time.Duration
		want string
	}{
		"zero shows every unit":          {0, "0h0m0s"},
		"seconds as in FORMAT.md":        {4 * time.Second, "0h0m4s"},
		"hours are not folded into days": {170*time.Hour + 3*time.Minute, "170h3m0s"},
		"sub-seconds are truncated":      {time.Minute + 1999*time.Millisecond, "0h1m1s"},
		"negative times keep their sign": {-(time.Hour + time.Second), "-1h0m1s"},
		"the smallest duration is safe":  {math.MinInt64, "-2562047h47m16s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := FormatClock(tc.in); got != tc.want {
				t.Errorf("FormatClock(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
