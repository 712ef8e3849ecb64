// Package localenv finds the development environment file that `make deps`
// and `make up` write (.local/env: shell exports of the platform's URLs and
// development secrets) and reads it, so an operator's tool run from anywhere
// in the repository finds the local platform without sourcing the file by
// hand. Variables already set in the environment win over the file.
package localenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Rel is where the file lives, relative to the repository root.
const Rel = ".local/env"

// Find walks up from dir to the repository root (the first directory with a
// go.mod) and returns the path of the first .local/env on the way; ok is
// false when there is none.
func Find(dir string) (path string, ok bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(dir, Rel)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return "", false // the root, and no file
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Load finds the file from dir (see Find) and sets every variable it
// exports that the environment does not already have. It returns the path
// it read, "" when there was none.
func Load(dir string) (string, error) {
	path, ok := Find(dir)
	if !ok {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	vars, err := Parse(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range vars {
		if _, set := os.LookupEnv(v[0]); !set {
			if err := os.Setenv(v[0], v[1]); err != nil {
				return "", err
			}
		}
	}
	return path, nil
}

// Parse reads lines of the form `export NAME='value'` (or NAME=value,
// NAME="value") as the stack script writes them; blank lines and comments
// are skipped. It returns name/value pairs in file order.
func Parse(r io.Reader) ([][2]string, error) {
	var out [][2]string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, raw, ok := strings.Cut(line, "=")
		if !ok || !validName(name) {
			return nil, fmt.Errorf("line %d: want NAME=value", n)
		}
		value, err := unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, [2]string{name, value})
	}
	return out, sc.Err()
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// unquote undoes the shell quoting of one word: single quotes (a quote
// inside is written quote, backslash, quote, quote), double quotes (with \"
// and \\), or a bare word.
func unquote(s string) (string, error) {
	var b strings.Builder
	for len(s) > 0 {
		switch s[0] {
		case '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", errors.New("unterminated '")
			}
			b.WriteString(s[1 : 1+end])
			s = s[2+end:]
		case '"':
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return "", errors.New(`unterminated "`)
			}
			s = s[i+1:]
		case '\\':
			if len(s) < 2 {
				return "", errors.New("trailing \\")
			}
			b.WriteByte(s[1])
			s = s[2:]
		case ' ', '\t':
			return "", errors.New("more than one word")
		default:
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String(), nil
}
