// Package docs holds evictd's documentation; its tests check that every
// relative link in the Markdown files resolves to a file of the
// repository, and every anchor to a heading of that file; that every test
// a document names is declared by a _test.go file of the repository; and
// that every cell of the compatibility matrix (COMPATIBILITY.md) that says
// tested names its test.
package docs
