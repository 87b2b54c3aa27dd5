// Package deploy checks the Kubernetes manifests in kubernetes/: every
// document decodes strictly into the official k8s.io/api types (an unknown
// or misspelt field fails) and keeps the properties chatmem relies on.
//
// It is a module of its own (github.com/chatmem/chatmem/deploy) so that the
// Kubernetes dependencies never enter the library's go.mod; `go test ./...`
// at the repository's root skips it, and .ci/run runs it with
// (cd deploy && go test ./...).
package deploy
