// Package outside holds tests of the module as others see it.
// TestOutsideModule builds a program in a module of its own that requires
// github.com/chatmem/chatmem as any other module would (through a replace
// to this checkout, since nothing is published) and runs it; the program,
// in testdata/seedreplay, can use only the public API, since the Go
// toolchain refuses internal packages across modules. TestReadmeQuickStart
// does the same with README.md's Go quick start, and
// TestExamplesOutsideModule runs the root package's examples there.
// TestDependenciesListed checks that the licence of every direct
// dependency is on record in docs/dependencies.md, and
// TestDocsNameNoIssues that the docs refer to no issue by number.
package outside
