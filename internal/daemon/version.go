package daemon

import "runtime/debug"

// version is set at link time by scripts/release.sh
// (-ldflags "-X github.com/toolagent/toolagent/internal/daemon.version=vX.Y.Z"),
// from git describe; "" in other builds.
var version string

// Version is the version of this binary, for MCP's serverInfo: the
// release's (scripts/release.sh), else the module version of a build by
// go install, else "devel" with the VCS revision the binary was built
// from (and "-dirty" for uncommitted changes).
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + rev + dirty
}
