// Package docs holds evictd's documentation; its test checks that every
// relative link in the Markdown files resolves to a file of the
// repository, and every anchor to a heading of that file.
package docs
