package settings

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Value is a typed setting bound to a variable. Set parses a string (from
// a flag, the environment or the config file) into the variable; String
// formats the variable in the form Set accepts.
type Value interface {
	String() string
	Set(string) error
	// Type names the type in the help: bool, int, duration, size, ...
	Type() string
	// Accepts says what Set accepts, for the one-line error of a bad value.
	Accepts() string
}

// boolFlag is what the flag package looks for to let a boolean flag stand
// alone (--insecure).
type boolFlag interface{ IsBoolFlag() bool }

type stringValue struct{ p *string }

// String binds a string setting to p, set to def.
func String(p *string, def string) Value { *p = def; return stringValue{p} }

func (v stringValue) String() string     { return *v.p }
func (v stringValue) Set(s string) error { *v.p = s; return nil }
func (v stringValue) Type() string       { return "string" }
func (v stringValue) Accepts() string    { return "any text" }

type choiceValue struct {
	p       *string
	choices []string
}

// Choice binds a setting to p, set to def, that takes one of choices.
func Choice(p *string, def string, choices ...string) Value {
	*p = def
	return choiceValue{p, choices}
}

func (v choiceValue) String() string { return *v.p }
func (v choiceValue) Set(s string) error {
	if !slices.Contains(v.choices, s) {
		return fmt.Errorf("%q is unknown", s)
	}
	*v.p = s
	return nil
}
func (v choiceValue) Type() string    { return strings.Join(v.choices, "|") }
func (v choiceValue) Accepts() string { return "one of " + strings.Join(v.choices, ", ") }

type listValue struct {
	p       *[]string
	choices []string // empty: any
}

// List binds a comma-separated list to p, set to def. With choices, each
// element must be one of them.
func List(p *[]string, def []string, choices ...string) Value {
	*p = slices.Clone(def)
	return listValue{p, choices}
}

func (v listValue) String() string { return strings.Join(*v.p, ",") }
func (v listValue) Set(s string) error {
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if len(v.choices) > 0 && !slices.Contains(v.choices, e) {
			return fmt.Errorf("%q is unknown", e)
		}
		out = append(out, e)
	}
	*v.p = out
	return nil
}
func (v listValue) Type() string { return "list" }
func (v listValue) Accepts() string {
	if len(v.choices) == 0 {
		return "a comma-separated list"
	}
	return "a comma-separated list of " + strings.Join(v.choices, ", ")
}

type boolValue struct{ p *bool }

// Bool binds a boolean setting to p, set to def. As a flag it may stand
// alone (--insecure) or take a value (--insecure=false).
func Bool(p *bool, def bool) Value { *p = def; return boolValue{p} }

func (v boolValue) String() string { return strconv.FormatBool(*v.p) }
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not a boolean", s)
	}
	*v.p = b
	return nil
}
func (v boolValue) Type() string     { return "bool" }
func (v boolValue) Accepts() string  { return "true or false" }
func (v boolValue) IsBoolFlag() bool { return true }

type intValue struct {
	p        *int
	min, max int
}

// Int binds a whole number from min to max to p, set to def.
func Int(p *int, def, min, max int) Value {
	*p = def
	return intValue{p, min, max}
}

func (v intValue) String() string { return strconv.Itoa(*v.p) }
func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("%d is out of range", n)
	}
	*v.p = n
	return nil
}
func (v intValue) Type() string    { return "int" }
func (v intValue) Accepts() string { return "a whole number" + rangeText(v.min, v.max) }

func rangeText(min, max int) string {
	switch {
	case min == math.MinInt && max == math.MaxInt:
		return ""
	case max == math.MaxInt:
		return fmt.Sprintf(" of at least %d", min)
	}
	return fmt.Sprintf(" from %d to %d", min, max)
}

type intListValue struct {
	p   *[]int
	min int
}

// IntList binds a comma-separated list of whole numbers, each at least
// min, to p, set to def.
func IntList(p *[]int, def []int, min int) Value {
	*p = slices.Clone(def)
	return intListValue{p, min}
}

func (v intListValue) String() string {
	s := make([]string, len(*v.p))
	for i, n := range *v.p {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
func (v intListValue) Set(s string) error {
	var out []int
	for _, e := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(e))
		if err != nil || n < v.min {
			return fmt.Errorf("%q is not a whole number of at least %d", e, v.min)
		}
		out = append(out, n)
	}
	*v.p = out
	return nil
}
func (v intListValue) Type() string { return "ints" }
func (v intListValue) Accepts() string {
	return fmt.Sprintf("comma-separated whole numbers of at least %d", v.min)
}

type floatValue struct {
	p   *float64
	min float64
}

// Float binds a number of at least min to p, set to def.
func Float(p *float64, def, min float64) Value {
	*p = def
	return floatValue{p, min}
}

func (v floatValue) String() string { return strconv.FormatFloat(*v.p, 'f', -1, 64) }
func (v floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%q is not a number", s)
	}
	if f < v.min {
		return fmt.Errorf("%s is out of range", s)
	}
	*v.p = f
	return nil
}
func (v floatValue) Type() string { return "float" }
func (v floatValue) Accepts() string {
	return "a number of at least " + strconv.FormatFloat(v.min, 'f', -1, 64) + ", such as 50 or 0.5"
}

type durationValue struct {
	p        *time.Duration
	positive bool
}

// Duration binds a duration to p, set to def: Go's form (90s, 15m, 1h30m)
// or whole and fractional days (30d, 1d12h). It may be zero unless
// positive; it is never negative.
func Duration(p *time.Duration, def time.Duration, positive bool) Value {
	*p = def
	return durationValue{p, positive}
}

func (v durationValue) String() string { return FormatDuration(*v.p) }
func (v durationValue) Set(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration", s)
	}
	if d < 0 || (v.positive && d == 0) {
		return fmt.Errorf("%s is out of range", s)
	}
	*v.p = d
	return nil
}
func (v durationValue) Type() string { return "duration" }
func (v durationValue) Accepts() string {
	if v.positive {
		return "a positive duration such as 90s, 15m, 2h or 30d"
	}
	return "a duration such as 0, 90s, 15m, 2h or 30d"
}

// ParseDuration parses Go's durations (300ms, 90s, 1h30m) and, before
// them, a number of days: 30d, 1.5d, 1d12h.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || strings.ContainsAny(days, "eE") || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("time: invalid duration %q", s)
	}
	const day = 24 * time.Hour
	if math.Abs(n) > float64(math.MaxInt64/int64(day)) {
		return 0, fmt.Errorf("time: invalid duration %q", s)
	}
	d := time.Duration(n * float64(day))
	if rest != "" {
		if rest[0] == '-' || rest[0] == '+' {
			return 0, fmt.Errorf("time: invalid duration %q", s)
		}
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("time: invalid duration %q", s)
		}
		if n < 0 {
			r = -r
		}
		d += r
	}
	return d, nil
}

// FormatDuration formats d in the shortest form ParseDuration reads back:
// 30d, 2h, 1m30s, 0.
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d == 0 {
		return "0"
	}
	if d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

type sizeValue struct {
	p        *int64
	min, max int64
}

// Size binds a byte size from min to max to p, set to def: a number of
// bytes, or one with a unit (4MiB, 512KiB, 1GB).
func Size(p *int64, def, min, max int64) Value {
	*p = def
	return sizeValue{p, min, max}
}

func (v sizeValue) String() string { return FormatSize(*v.p) }
func (v sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return fmt.Errorf("%q is not a size", s)
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("%s is out of range", s)
	}
	*v.p = n
	return nil
}
func (v sizeValue) Type() string { return "size" }
func (v sizeValue) Accepts() string {
	return fmt.Sprintf("a size from %s to %s such as 4MiB, 512KiB, 1GB or a number of bytes", FormatSize(v.min), FormatSize(v.max))
}

// sizeUnits are the units ParseSize reads, matched without regard to case:
// KiB, MiB, GiB and TiB are powers of 1024; KB, MB, GB and TB of 1000.
var sizeUnits = []struct {
	name string
	n    int64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1},
}

// ParseSize parses a byte size: 4194304, 4MiB, 4 MiB, 1.5GiB, 256KB.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(t, u.name); ok {
			t, mult = strings.TrimSpace(num), u.n
			break
		}
	}
	if t == "" {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n != 0 && (n > math.MaxInt64/mult || n < math.MinInt64/mult) {
			return 0, fmt.Errorf("size %q overflows", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || strings.ContainsAny(t, "eExXpP") || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	b := f * float64(mult)
	if b != math.Trunc(b) || math.Abs(b) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(b), nil
}

// FormatSize formats n with the largest binary unit that divides it:
// 4MiB, 256KiB, 1000 (bytes).
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

type checkedValue struct {
	p            *string
	typ, accepts string
	check        func(string) error
}

// Checked binds a string setting to p, set to def, that check accepts;
// typ names it in the help and accepts says what check accepts.
func Checked(p *string, def, typ, accepts string, check func(string) error) Value {
	*p = def
	return checkedValue{p, typ, accepts, check}
}

func (v checkedValue) String() string { return *v.p }
func (v checkedValue) Set(s string) error {
	if err := v.check(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}
func (v checkedValue) Type() string    { return v.typ }
func (v checkedValue) Accepts() string { return v.accepts }
