// Command image builds evictd's container image without a Docker daemon,
// with go-containerregistry, from the release binaries of `make release`:
// `make image`. It writes <dist>/evictd-image-<version>.oci.tar, an OCI
// image layout holding one image index, <repo>:<version>, with an image per
// architecture, and prints its name. `ctr images import` loads it into
// containerd; `crane push` (or skopeo, from oci-archive:) puts it in a
// registry.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	var (
		o      options
		arches string
	)
	flag.StringVar(&o.version, "version", "", "evictd's version as `git describe` prints it (the Makefile's VERSION): the image's tag")
	flag.StringVar(&o.repo, "repo", "ghcr.io/evictd/evictd", "the image's repository")
	flag.StringVar(&o.dist, "dist", "dist", "where the release binaries are and the image archive goes")
	flag.StringVar(&arches, "arch", "amd64", "space-separated GOARCHes, each from <dist>/evictd-<version>-linux-<arch>")
	flag.Parse()
	o.arches = strings.Fields(arches)

	out, err := build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println(filepath.Base(out))
}
