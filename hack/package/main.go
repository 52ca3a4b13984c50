// Command package builds evictd's .deb and .rpm packages with nfpm, as
// packaging/nfpm.yaml describes them, from the release binaries of `make
// release`: `make package`. It prints the names of the packages it wrote,
// one a line.
package main

import (
	"errors"
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
	flag.StringVar(&o.root, "root", ".", "the repository's root: the config's sources are relative to it")
	flag.StringVar(&o.config, "config", "packaging/nfpm.yaml", "nfpm's config, relative to -root")
	flag.StringVar(&o.version, "version", "", "evictd's version as `git describe` prints it (the Makefile's VERSION)")
	flag.StringVar(&o.dist, "dist", "dist", "where the release binaries are and the packages go")
	flag.StringVar(&arches, "arch", "amd64", "space-separated GOARCHes to package, each from <dist>/evictd-<version>-linux-<arch>")
	formats := flag.String("formats", "deb rpm", "space-separated nfpm packagers")
	flag.Parse()
	o.formats = strings.Fields(*formats)

	if err := run(o, strings.Fields(arches)); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

func run(o options, arches []string) error {
	if len(arches) == 0 {
		return errors.New("no -arch to package")
	}
	for _, arch := range arches {
		a := o
		a.arch = arch
		a.bin = filepath.Join(o.dist, "evictd-"+o.version+"-linux-"+arch)
		written, err := build(a)
		if err != nil {
			return err
		}
		for _, p := range written {
			fmt.Println(filepath.Base(p))
		}
	}
	return nil
}
