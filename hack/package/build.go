package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// options say what to package and where.
type options struct {
	root    string   // the repository's root; the config's sources are relative to it
	config  string   // nfpm's config, relative to root
	version string   // evictd's version as git describe prints it
	arch    string   // GOARCH
	bin     string   // the evictd binary built for arch
	dist    string   // where the packages go
	formats []string // nfpm packagers: deb, rpm
}

// build writes one package of o.bin per format into o.dist and returns
// their paths.
func build(o options) ([]string, error) {
	version, err := pkgVersion(o.version)
	if err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the evictd binary to package: %w", err)
	}
	service, err := os.ReadFile(filepath.Join(o.root, "systemd", "evictd.service"))
	if err != nil {
		return nil, err
	}
	service, err = packagedUnit(service)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "evictd-package-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	unit := filepath.Join(tmp, "evictd.service")
	if err := os.WriteFile(unit, service, 0o644); err != nil {
		return nil, err
	}

	docs := filepath.Join(tmp, "docs")
	if err := writeDocs(o, bin, docs); err != nil {
		return nil, err
	}

	vars := map[string]string{"PKG_VERSION": version, "ARCH": o.arch, "EVICTD_BIN": bin, "EVICTD_UNIT": unit, "EVICTD_DOCS": docs}
	var unknown []string
	mapping := func(name string) string {
		v, ok := vars[name]
		// nfpm itself asks for NFPM_*_PASSPHRASE, to sign; we do not.
		if !ok && !strings.HasPrefix(name, "NFPM_") {
			unknown = append(unknown, name)
		}
		return v
	}
	path := filepath.Join(o.root, o.config)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	cfg, err := nfpm.ParseWithEnvMapping(f, mapping)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s: unknown variables %v; hack/package sets %v", path, unknown, slices.Sorted(maps.Keys(vars)))
	}
	// nfpm reads relative sources from the working directory; ours are
	// relative to the repository's root.
	rel := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(o.root, *p)
		}
	}
	for _, c := range cfg.Contents {
		rel(&c.Source)
	}
	for _, p := range []*string{&cfg.Scripts.PreInstall, &cfg.Scripts.PostInstall, &cfg.Scripts.PreRemove, &cfg.Scripts.PostRemove} {
		rel(p)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	if err := os.MkdirAll(o.dist, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, format := range o.formats {
		p, err := write(&cfg, format, o.dist)
		if err != nil {
			return written, fmt.Errorf("%s package for %s: %w", format, o.arch, err)
		}
		written = append(written, p)
	}
	return written, nil
}

// write builds cfg's package in format into dir, under the packager's
// conventional name, and returns its path.
func write(cfg *nfpm.Config, format, dir string) (string, error) {
	info, err := cfg.Get(format)
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	pkg, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, pkg.ConventionalFileName(info))
	info.Target = path
	var buf bytes.Buffer
	if err := pkg.Package(info, &buf); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// installedExecStart is the ExecStart of systemd/evictd.service, for the
// binary where make install puts it; packagedExecStart is the package's.
const (
	installedExecStart = "ExecStart=/usr/local/bin/evictd "
	packagedExecStart  = "ExecStart=/usr/bin/evictd "
)

var execStart = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(installedExecStart))

// packagedUnit returns the unit with its one ExecStart= running the
// package's /usr/bin/evictd instead of /usr/local/bin/evictd.
func packagedUnit(unit []byte) ([]byte, error) {
	if n := len(execStart.FindAllIndex(unit, -1)); n != 1 {
		return nil, fmt.Errorf("evictd.service: got %d lines starting %q, want 1", n, installedExecStart)
	}
	return execStart.ReplaceAllLiteral(unit, []byte(packagedExecStart)), nil
}

// describe is what git describe prints for VERSION: a tag vX.Y.Z with an
// optional pre-release (-rc.1), then, after the tag, -<commits>-g<sha>,
// then -dirty for uncommitted changes.
var describe = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)(?:-([0-9A-Za-z.]+))??(?:-([0-9]+)-(g[0-9a-f]+))?(-dirty)?$`)

// pkgVersion turns git describe's version into one dpkg and rpm order as
// git does: a pre-release before its release (1.2.3~rc.1 < 1.2.3), commits
// after their tag (1.2.3 < 1.2.3+git4.gabcdef0 < 1.2.3+git5.g0123456).
func pkgVersion(v string) (string, error) {
	m := describe.FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("version %q: want git describe's vX.Y.Z[-pre][-N-gSHA][-dirty] (the Makefile's VERSION)", v)
	}
	out := m[1]
	if m[2] != "" {
		out += "~" + m[2]
	}
	var local []string
	if m[3] != "" {
		local = append(local, "git"+m[3], m[4])
	}
	if m[5] != "" {
		local = append(local, "dirty")
	}
	if len(local) > 0 {
		out += "+" + strings.Join(local, ".")
	}
	return out, nil
}

// writeDocs writes into dir what `evictd completion` makes for the
// packages: the bash, zsh and fish completion scripts (evictd.bash,
// _evictd, evictd.fish) and the man pages (man/*.8). They are the same
// for every architecture, so a binary for this machine writes them: bin
// when it is one, else the release binary for this machine beside it.
func writeDocs(o options, bin, dir string) error {
	host := bin
	if o.arch != runtime.GOARCH {
		host = filepath.Join(filepath.Dir(bin), "evictd-"+o.version+"-linux-"+runtime.GOARCH)
		if _, err := os.Stat(host); err != nil {
			return fmt.Errorf("the completions and man pages of the %s package are written by an evictd binary for this machine (%s): %w", o.arch, runtime.GOARCH, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "man"), 0o755); err != nil {
		return err
	}
	for shell, name := range map[string]string{"bash": "evictd.bash", "zsh": "_evictd", "fish": "evictd.fish"} {
		out, err := exec.Command(host, "completion", shell).Output()
		if err != nil {
			return fmt.Errorf("%s completion %s: %w", host, shell, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), out, 0o644); err != nil {
			return err
		}
	}
	if out, err := exec.Command(host, "completion", "man", filepath.Join(dir, "man")).CombinedOutput(); err != nil {
		return fmt.Errorf("%s completion man: %w: %s", host, err, out)
	}
	return nil
}
