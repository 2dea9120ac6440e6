// Package doclinks checks the repository's Markdown: every relative link in
// README.md and docs/ names a file that exists and, for a Markdown file, a
// heading or an <a id> anchor in it, as a code host renders them.
package doclinks

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	linkRE    = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	idRE      = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeRE    = regexp.MustCompile("`+[^`]*`+")
	tagRE     = regexp.MustCompile(`<[^>]*>`)
	punctRE   = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// Slug is the anchor a code host (GitHub) gives a heading's text: lower
// case, markup and punctuation but '-' and '_' dropped, spaces to '-'.
func Slug(heading string) string {
	s := tagRE.ReplaceAllString(heading, "")
	s = strings.NewReplacer("`", "", "*", "", "[", "", "]", "").Replace(s)
	// A link in a heading reads as its text.
	s = regexp.MustCompile(`\(([^)]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
		if strings.Contains(m, "/") || strings.Contains(m, "#") {
			return ""
		}
		return m
	})
	s = strings.ToLower(strings.TrimSpace(s))
	s = punctRE.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// Doc is one Markdown file: its anchors and its links, outside code.
type Doc struct {
	Path    string
	Anchors map[string]bool
	Links   []Link
}

// Link is one [text](target) with the line it is on.
type Link struct {
	Line   int
	Target string
}

// Parse reads a Markdown file, skipping fenced code and code spans.
func Parse(path string) (*Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	d := &Doc{Path: path, Anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		for _, m := range idRE.FindAllStringSubmatch(line, -1) {
			d.Anchors[m[1]] = true
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			s := Slug(m[2])
			if n := seen[s]; n > 0 {
				d.Anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				d.Anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, "``"), -1) {
			d.Links = append(d.Links, Link{Line: i + 1, Target: m[2]})
		}
	}
	return d, nil
}

// Check returns one problem a line for every relative link of the files
// that does not resolve: a missing file, or an anchor that the target
// Markdown file does not have.
func Check(files []string) ([]string, error) {
	docs := map[string]*Doc{}
	load := func(p string) (*Doc, error) {
		if d, ok := docs[p]; ok {
			return d, nil
		}
		d, err := Parse(p)
		if err != nil {
			return nil, err
		}
		docs[p] = d
		return d, nil
	}
	var problems []string
	for _, f := range files {
		d, err := load(f)
		if err != nil {
			return nil, err
		}
		for _, l := range d.Links {
			u, err := url.Parse(l.Target)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %v", f, l.Line, l.Target, err))
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue
			}
			target := f
			if u.Path != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(u.Path))
				if _, err := os.Stat(target); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", f, l.Line, l.Target))
					continue
				}
			}
			if u.Fragment == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			td, err := load(target)
			if err != nil {
				return nil, err
			}
			if !td.Anchors[u.Fragment] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading or anchor #%s in %s", f, l.Line, l.Target, u.Fragment, target))
			}
		}
	}
	return problems, nil
}
