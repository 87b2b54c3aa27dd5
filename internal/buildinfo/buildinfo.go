// Package buildinfo tells which chatmem is running: the module version, the
// VCS revision and time it was built from, and the Go version, as the Go
// toolchain recorded them in the binary (runtime/debug.ReadBuildInfo).
//
// A release build stamps what the toolchain cannot know (a version for a
// build from a checkout, where the toolchain records "(devel)") with -ldflags:
//
//	go build -ldflags "-X github.com/chatmem/chatmem/internal/buildinfo.version=v1.2.3 \
//	  -X github.com/chatmem/chatmem/internal/buildinfo.revision=$(git rev-parse HEAD) \
//	  -X github.com/chatmem/chatmem/internal/buildinfo.time=2026-12-01T12:00:00Z" ./cmd/chatmem
//
// scripts/release.sh does this. A stamped value wins over the recorded one.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// ModulePath is chatmem's module path: the main module when the chatmem
// command runs, one dependency among others in a program that imports the
// library.
const ModulePath = "github.com/chatmem/chatmem"

// Set at link time with -ldflags -X (see the package comment); empty: use
// what the toolchain recorded. They are strings the linker writes, never
// assigned at run time.
var (
	version  string
	revision string
	time     string
)

// Info is one build's identity. Fields the build did not record are empty
// (Modified is then false).
type Info struct {
	// Version is chatmem's module version: a tag such as v1.2.3, a
	// pseudo-version, or "(devel)" for a build from a checkout that was
	// not stamped.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from.
	Revision string `json:"revision"`
	// Time is that commit's time, RFC 3339.
	Time string `json:"time"`
	// Modified reports a build from a working tree with uncommitted
	// changes.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary (go1.26.0).
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return fromBuildInfo(bi, version, revision, time)
}

// fromBuildInfo is Read for a given build record (nil: none) and stamped
// values.
func fromBuildInfo(bi *debug.BuildInfo, stampedVersion, stampedRevision, stampedTime string) Info {
	info := Info{GoVersion: runtime.Version()}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		switch {
		case bi.Main.Path == ModulePath:
			info.Version = bi.Main.Version
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					info.Revision = s.Value
				case "vcs.time":
					info.Time = s.Value
				case "vcs.modified":
					info.Modified = s.Value == "true"
				}
			}
		default:
			// chatmem as a library: its version is that of the dependency;
			// the VCS settings are those of the program, not chatmem's.
			for _, d := range bi.Deps {
				if d.Path != ModulePath {
					continue
				}
				if d.Replace != nil && d.Replace.Version != "" {
					d = d.Replace
				}
				info.Version = d.Version
			}
		}
	}
	if stampedVersion != "" {
		info.Version = stampedVersion
	}
	if stampedRevision != "" {
		info.Revision = stampedRevision
	}
	if stampedTime != "" {
		info.Time = stampedTime
	}
	return info
}

// String is the one line `chatmem version` prints:
//
//	chatmem v1.2.3 (revision 0123abcd..., 2026-12-01T12:00:00Z, modified) go1.26.0
//
// leaving out what the build did not record.
func (i Info) String() string {
	v := i.Version
	if v == "" {
		v = "(unknown version)"
	}
	var details []string
	if i.Revision != "" {
		details = append(details, "revision "+i.Revision)
	}
	if i.Time != "" {
		details = append(details, i.Time)
	}
	if i.Modified {
		details = append(details, "modified")
	}
	s := "chatmem " + v
	if len(details) > 0 {
		s += " (" + strings.Join(details, ", ") + ")"
	}
	return fmt.Sprintf("%s %s", s, i.GoVersion)
}
