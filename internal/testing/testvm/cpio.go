package testvm

import (
	"fmt"
	"io"
)

// cpioWriter writes an initramfs: a cpio archive in the "newc" format the
// kernel unpacks (Documentation/driver-api/early-userspace/buffer-format.rst),
// uncompressed.
type cpioWriter struct {
	w   io.Writer
	ino int
	err error
}

// cpio modes: the file type bits of stat(2).
const (
	cpioDir     = 0o040000
	cpioRegular = 0o100000
	cpioSymlink = 0o120000
)

func (c *cpioWriter) entry(name string, mode int, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&cpioDir != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad(len(hdr) + len(name) + 1)
	c.write(data)
	c.pad(len(data))
}

// dir, file and symlink add one entry; paths have no leading slash.
func (c *cpioWriter) dir(name string)               { c.entry(name, cpioDir|0o755, nil) }
func (c *cpioWriter) file(name string, data []byte) { c.entry(name, cpioRegular|0o755, data) }
func (c *cpioWriter) symlink(name, target string)   { c.entry(name, cpioSymlink|0o777, []byte(target)) }
func (c *cpioWriter) close() error                  { c.entry("TRAILER!!!", 0, nil); return c.err }
func (c *cpioWriter) pad(n int)                     { c.write(make([]byte, (4-n%4)%4)) }
func (c *cpioWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}
