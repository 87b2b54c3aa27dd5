// Package outside holds one test: it builds a program in a module of its
// own that requires github.com/chatmem/chatmem as any other module would
// (through a replace to this checkout, since nothing is published) and runs
// it. The program lives in testdata/seedreplay; it may use only the public
// API, which the Go toolchain enforces: internal packages do not import
// from another module.
package outside
