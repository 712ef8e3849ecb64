package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestString(t *testing.T) {
	for _, c := range []struct {
		in   string
		at   int
		want string
		next int
		ok   bool
	}{
		{`"abc",`, 0, "abc", 5, true},
		{`x:"",`, 2, "", 4, true},
		{`"a\"b"`, 0, "", 2, false},   // an escape
		{`"é"`, 0, "", 1, false},      // not ASCII
		{"\"a\tb\"", 0, "", 2, false}, // a control byte
		{`"abc`, 0, "", 4, false},     // unterminated
		{`abc`, 0, "", 0, false},      // not a string
		{`"a"`, 3, "", 3, false},      // past the end
	} {
		s, next, ok := String(c.in, c.at)
		if s != c.want || ok != c.ok || (ok && next != c.next) {
			t.Errorf("String(%q, %d) = %q, %d, %v; want %q, %d, %v", c.in, c.at, s, next, ok, c.want, c.next, c.ok)
		}
	}
}

func TestInt(t *testing.T) {
	for _, c := range []struct {
		in     string
		digits int
		want   int64
		next   int
		ok     bool
	}{
		{`0,`, 9, 0, 1, true},
		{`42}`, 9, 42, 2, true},
		{`1767225600,`, 12, 1767225600, 10, true},
		{`123456789`, 9, 123456789, 9, true},
		{`1234567890`, 9, 0, 10, false}, // too many digits
		{`007`, 9, 0, 3, false},         // a leading zero
		{`-1`, 9, 0, 0, false},          // negative
		{`1.5`, 9, 1, 1, true},          // the caller sees the '.' next and refuses
		{``, 9, 0, 0, false},
		{`99999999999999999999`, 30, 0, 20, false}, // beyond 18 digits, whatever the caller allows
	} {
		n, next, ok := Int(c.in, 0, c.digits)
		if n != c.want || ok != c.ok || next != c.next {
			t.Errorf("Int(%q, %d) = %d, %d, %v; want %d, %d, %v", c.in, c.digits, n, next, ok, c.want, c.next, c.ok)
		}
	}
}

// AppendString writes what json.Marshal writes for a string, after what
// was there.
func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "abc", "a\"b", `a\b`, "<&>", "\x7f", "\x00", "é", "\u2028", "\xff", "tab\there"} {
		checkAppendString(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "abc", "a\"b", "<&>", "\x7f", "é", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(checkAppendString)
}

func checkAppendString(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString([]byte("x:"), s); string(got) != "x:"+string(want) {
		t.Errorf("AppendString(%q) = %s, want x:%s", s, got, want)
	}
}
