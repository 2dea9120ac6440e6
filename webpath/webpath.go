// Package webpath reads a request path the way the web servers behind
// hookpace route it, so that a door judges a request by the path its
// receiver will serve: dot segments and repeated slashes resolved (Go's
// path.Clean), ";" parameters stripped from each segment (Tomcat, Java's
// HttpServer), percent-encoded unreserved characters decoded, case folded
// and a trailing slash ignored (Express). An encoded separator (%2F, %5C)
// or a raw backslash is kept as it is, but the path is judged both ways:
// as one segment and as a separator, whichever a server makes of it.
package webpath

import (
	"errors"
	"path"
	"strings"
)

// ErrEscape is a path holding a "%" that is not followed by two hex digits.
var ErrEscape = errors.New("invalid percent escape in path")

// Path is a request path as servers route it.
type Path struct {
	// Clean is the escaped path, cleaned: what a door forwards, so that
	// what was judged is what is sent. Case is kept as it came.
	Clean string
	fold  string // Clean, lower case: what patterns match
	alt   string // fold with encoded separators as separators; "" when it has none
}

// Normalize cleans escaped, a request's escaped path (url.URL.EscapedPath).
// A path that does not start with "/" ("*" of OPTIONS) is kept as it is.
func Normalize(escaped string) (Path, error) {
	if escaped == "" {
		escaped = "/"
	}
	if escaped[0] != '/' {
		return Path{Clean: escaped, fold: strings.ToLower(escaped)}, nil
	}
	var b strings.Builder
	b.Grow(len(escaped))
	sep := false // an encoded separator or a backslash is in the path
	for seg := range strings.SplitSeq(escaped[1:], "/") {
		seg, _, _ = strings.Cut(seg, ";")
		b.WriteByte('/')
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			switch {
			case c == '\\':
				sep = true
				b.WriteByte(c)
			case c != '%':
				b.WriteByte(c)
			case i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]):
				return Path{}, ErrEscape
			default:
				d := unhex(seg[i+1])<<4 | unhex(seg[i+2])
				i += 2
				switch {
				case unreserved(d):
					b.WriteByte(d)
				default:
					sep = sep || d == '/' || d == '\\'
					const digits = "0123456789ABCDEF"
					b.WriteByte('%')
					b.WriteByte(digits[d>>4])
					b.WriteByte(digits[d&15])
				}
			}
		}
	}
	clean := path.Clean(b.String())
	p := Path{Clean: clean, fold: strings.ToLower(clean)}
	if sep {
		p.alt = path.Clean(separators.Replace(p.fold))
	}
	return p, nil
}

// separators reads encoded separators (in a folded path) and backslashes
// as slashes.
var separators = strings.NewReplacer("%2f", "/", "%5c", "/", `\`, "/")

// Separators reports whether the path holds an encoded separator (%2F,
// %5C) or a backslash, which servers disagree about.
func (p Path) Separators() bool { return p.alt != "" }

// Fold is the cleaned path in lower case: what patterns are matched with.
func (p Path) Fold() string { return p.fold }

// Alt is Fold with its encoded separators read as separators (and
// cleaned again): Fold itself when it has none.
func (p Path) Alt() string {
	if p.alt == "" {
		return p.fold
	}
	return p.alt
}

// Match reports whether pattern (a path.Match glob, a trailing "/**"
// matching any rest of the path) matches the path, case-folded, read
// either way when it holds an encoded separator.
func (p Path) Match(pattern string) bool {
	pattern = Pattern(pattern)
	return Match(pattern, p.fold) || (p.alt != "" && Match(pattern, p.alt))
}

// Under reports whether the path is pattern's or below it: pattern
// matches the path or one of its leading segments.
func (p Path) Under(pattern string) bool {
	pattern = strings.TrimSuffix(Pattern(pattern), "/**")
	if pattern == "" || pattern == "/" {
		return true
	}
	return Match(pattern+"/**", p.fold) || (p.alt != "" && Match(pattern+"/**", p.alt))
}

// Pattern is pattern as paths are matched with it: lower case, without a
// trailing slash (which cleaned paths never have), "/**" kept.
func Pattern(pattern string) string {
	pattern = strings.ToLower(pattern)
	if len(pattern) > 1 && strings.HasSuffix(pattern, "/") {
		pattern = strings.TrimRight(pattern, "/")
		if pattern == "" {
			pattern = "/"
		}
	}
	return pattern
}

// Match is path.Match, with a trailing "/**" in pattern matching any rest
// of p (and nothing after the slash). Both are taken as they are: fold
// them first for a case-insensitive match.
func Match(pattern, p string) bool {
	base, ok := strings.CutSuffix(pattern, "/**")
	if !ok {
		ok, _ := path.Match(pattern, p)
		return ok
	}
	if base == "" {
		return true
	}
	if ok, _ := path.Match(base, p); ok {
		return true
	}
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			if ok, _ := path.Match(base, p[:i]); ok {
				return true
			}
		}
	}
	return false
}

// unreserved is RFC 3986's unreserved set: ALPHA DIGIT - . _ ~
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
