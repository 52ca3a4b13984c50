package host

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// HugePages reads the node's hugepage capacity, in bytes, from the meminfo
// file under cfg.ProcRoot (parseHugetlb): what kubelet 1.37 subtracts from
// memory.available unless DisableHugepageAwareEviction.
func HugePages(cfg Config) (int64, error) {
	path := filepath.Join(cfg.ProcRoot, "meminfo")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return parseHugetlb(path, b)
}

// parseHugetlb returns the node's hugepage capacity in bytes, every page
// size together, from b, the content of the meminfo file: its line
// "Hugetlb: <n> kB". The kernel (4.15 and later) writes there the sum over
// every hugepage size of the pages in its pool times their size
// (mm/hugetlb.c, hugetlb_report_meminfo, from each size's nr_huge_pages):
// the figure kubelet 1.37 subtracts, its hugepages-<size> node capacities,
// which cAdvisor (GetHugePagesInfo) computes as nr_hugepages × page size of
// each /sys/kernel/mm/hugepages/hugepages-<size>kB, the same nr_huge_pages.
//
// A kernel without hugetlb support writes no hugepage line at all: that is
// no hugepages, 0, as for the kubelet, whose cAdvisor takes a missing
// /sys/kernel/mm/hugepages for a machine without hugepages. A file with
// HugePages_Total but no Hugetlb line (an older kernel, which shows the
// default page size only), a garbled Hugetlb line or one in another unit is
// an error naming the file and the line, never a zero.
func parseHugetlb(file string, b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	total := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "HugePages_Total:":
			total = true
			continue
		case "Hugetlb:":
		default:
			continue
		}
		if len(f) != 3 || f[2] != "kB" {
			return 0, fmt.Errorf("parse %s: Hugetlb line %q is not \"Hugetlb: <n> kB\"", file, sc.Text())
		}
		kb, err := parseCount(file, f[1])
		if err != nil {
			return 0, fmt.Errorf("parse %s: Hugetlb value %q: want a non-negative number of kB", file, f[1])
		}
		if kb > math.MaxInt64/1024 {
			return 0, fmt.Errorf("parse %s: Hugetlb %d kB overflows int64 bytes", file, kb)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("parse %s: %w", file, err)
	}
	if total {
		return 0, fmt.Errorf("parse %s: HugePages_Total but no Hugetlb line (a kernel before 4.15?): the hugepage capacity of every page size cannot be read; "+
			"HugepageAwareEviction=false computes memory.available without it, as kubelet 1.36", file)
	}
	return 0, nil
}
