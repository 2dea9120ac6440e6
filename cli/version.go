package cli

import (
	_ "embed"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// release is the version of this source tree: cli/VERSION, which names
// the next release with -dev between releases, and the release itself in
// the commit tagged with it (see CHANGELOG.md).
//
//go:embed VERSION
var release string

// Version and Commit may be set by the build with -ldflags "-X
// github.com/hookpace/hookpace/cli.Version=v1.2.3 -X
// github.com/hookpace/hookpace/cli.Commit=SHA" (the Dockerfile does, from
// its build args). Left empty, Version is cli/VERSION and Commit the
// vcs.revision that go build stamps in a git checkout: by default, or with
// -buildvcs=true when GOFLAGS has -buildvcs=false.
var Version, Commit string

// versionString is what "hookpace version" prints.
func versionString() string {
	version, commit, modified := Version, Commit, false
	if version == "" {
		version = "v" + strings.TrimSpace(release)
	}
	module, stamped := "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		// go install ...@v1.2.3 builds the module at that version, outside
		// any checkout: say so when it is not cli/VERSION (a pseudo-version
		// names the commit). In a checkout, go build derives a version from
		// the git tags, which the commit line says better.
		if v := bi.Main.Version; v != "" && v != "(devel)" && v != version {
			module = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs":
				stamped = true
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if module != "" && !stamped && Version == "" {
		version += " (module " + module + ")"
	}
	if commit == "" {
		commit = "unknown (not stamped: build in a git checkout with -buildvcs=true, or with -ldflags \"-X github.com/hookpace/hookpace/cli.Commit=SHA\")"
	}
	if modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("hookpace %s\ncommit %s\n%s %s/%s\n", version, commit,
		strings.TrimSpace(runtime.Version()), runtime.GOOS, runtime.GOARCH)
}

func version(args []string, out io.Writer) error {
	fs := newFlags("version")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0)}
	}
	fmt.Fprint(out, versionString())
	return nil
}
