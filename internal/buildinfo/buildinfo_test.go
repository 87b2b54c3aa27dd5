package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "-compiler", Value: "gc"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T12:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name                      string
		bi                        *debug.BuildInfo
		stampV, stampR, stampTime string
		want                      Info
	}{{
		name: "no build info",
		want: Info{GoVersion: runtime.Version()},
	}, {
		name: "the command, built from a modified checkout",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: ModulePath, Version: "(devel)"}, Settings: vcs},
		want: Info{Version: "(devel)", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-12-01T12:00:00Z", Modified: true, GoVersion: "go1.26.0"},
	}, {
		name: "go install @v1.2.3",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: ModulePath, Version: "v1.2.3"}},
		want: Info{Version: "v1.2.3", GoVersion: "go1.26.0"},
	}, {
		name:   "a release stamped with -ldflags",
		bi:     &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: ModulePath, Version: "(devel)"}},
		stampV: "v2.0.0", stampR: "fedcba", stampTime: "2026-12-02T00:00:00Z",
		want: Info{Version: "v2.0.0", Revision: "fedcba", Time: "2026-12-02T00:00:00Z", GoVersion: "go1.26.0"},
	}, {
		name: "a program importing the library: chatmem's version, not the program's VCS",
		bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/bot", Version: "(devel)"}, Settings: vcs,
			Deps: []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.49.0"}, {Path: ModulePath, Version: "v1.4.0"}}},
		want: Info{Version: "v1.4.0", GoVersion: "go1.26.0"},
	}, {
		name: "a program importing a replaced library",
		bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/bot"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.4.1-fork"}}}},
		want: Info{Version: "v1.4.1-fork", GoVersion: "go1.26.0"},
	}, {
		name: "a program not using chatmem's module",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/bot"}},
		want: Info{GoVersion: "go1.26.0"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromBuildInfo(tt.bi, tt.stampV, tt.stampR, tt.stampTime)
			if got != tt.want {
				t.Errorf("fromBuildInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.3", Revision: "abc", Time: "2026-12-01T12:00:00Z", Modified: true, GoVersion: "go1.26.0"},
			"chatmem v1.2.3 (revision abc, 2026-12-01T12:00:00Z, modified) go1.26.0"},
		{Info{Version: "(devel)", GoVersion: "go1.26.0"}, "chatmem (devel) go1.26.0"},
		{Info{GoVersion: "go1.26.0"}, "chatmem (unknown version) go1.26.0"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRead checks what the test binary itself records: this module as the
// main module, and the toolchain that built it.
func TestRead(t *testing.T) {
	got := Read()
	if got.GoVersion != runtime.Version() {
		t.Errorf("Read().GoVersion = %q, want %q", got.GoVersion, runtime.Version())
	}
	if got.Version == "" {
		t.Errorf("Read().Version is empty, want this module's version or (devel)")
	}
}
