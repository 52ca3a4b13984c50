// Package buildinfo says which build of evictd is running: the module
// version and the VCS revision the Go toolchain stamped, for `evictd
// version` and evictd_build_info alike.
package buildinfo
