// Package release tests `make release`: the static binaries for each
// architecture and their SHA256SUMS.
package release
