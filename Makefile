# evictd — the two commands that matter on a fresh machine (as root):
#   make demo   bring a whole node up, watch evictd evict the right pod
#   make test   run every test, the end-to-end scenarios on a real node too
#               and a short run of every fuzz target (make fuzz: longer)
# and `make run` runs the agent standalone on this host.

GO       ?= go
BIN      := bin/evictd
# The version is git describe's of the last release tag (CHANGELOG.md):
# v1.2.3 on the tagged commit, v1.2.3-4-gabcdef0 four commits after it,
# -dirty with uncommitted changes. Before the first tag, the same form as if
# v0.0.0 tagged the first commit: v0.0.0-<commits>-g<sha>. dev outside git.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || \
	{ n=$$(git rev-list --count HEAD 2>/dev/null) && echo "v0.0.0-$$n-g$$(git describe --always --dirty)"; } || \
	echo dev)
endif
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# grpcnotrace builds gRPC without golang.org/x/net/trace: its per-call
# traces (grpc.EnableTracing) are off and its /debug/requests pages go on
# http.DefaultServeMux, which evictd does not serve. Linked in, its
# html/template reaches text/template's calls of methods by name, and the
# linker then keeps every exported method of every type: 7.5 of the
# binary's 31 MB, mapped in (docs/BENCHMARKS.md, "Cost on a real node").
TAGS     ?= grpcnotrace
PREFIX   ?= /usr/local
SYSCONF  ?= /etc
UNITDIR  ?= /etc/systemd/system
# Where `make run` serves /metrics, /healthz, /readyz and /status.
RUN_ADDR ?= 127.0.0.1:9847
# nodefs is the filesystem of the kubelet's root dir; on a machine without a
# kubelet, /var/lib stands in for it.
RUN_ROOT_DIR ?= $(shell [ -d /var/lib/kubelet ] && echo /var/lib/kubelet || echo /var/lib)
RUN_ARGS ?=

.PHONY: all build release package image run vm rpm-tools test test-v2 e2e e2e-run e2e-host e2e-apiserver e2e-node e2e-guest vet fmt-check bench install uninstall clean k8s-bins tools manifests runtime demo fuzz fuzz-short

all: build

# A static binary (no cgo): it runs on any node's distribution whatever its
# libc, and it is the binary the tests build (testruntime.GoBuild).
build:
	CGO_ENABLED=0 $(GO) build -tags '$(TAGS)' -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/evictd

# Release artifacts in $(DIST) (git-ignored): the binary of `make build`
# (static, the same tags and flags) for each of RELEASE_ARCHES, named
# evictd-$(VERSION)-linux-<arch>, and their SHA256SUMS (sha256sum -c).
# About a minute per architecture the first time. hack/release tests it.
DIST           ?= dist
RELEASE_ARCHES ?= amd64 arm64
RELEASE_BINS   := $(foreach a,$(RELEASE_ARCHES),evictd-$(VERSION)-linux-$(a))
release:
	@mkdir -p $(DIST)
	@set -e; for arch in $(RELEASE_ARCHES); do \
		echo "build $(DIST)/evictd-$(VERSION)-linux-$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -tags '$(TAGS)' -trimpath -ldflags '$(LDFLAGS)' \
			-o $(DIST)/evictd-$(VERSION)-linux-$$arch ./cmd/evictd; \
	done
	cd $(DIST) && sha256sum $(RELEASE_BINS) > SHA256SUMS

# .deb and .rpm packages of the release binaries, built with nfpm
# (packaging/nfpm.yaml, hack/package): the binary in /usr/bin, the units
# in /usr/lib/systemd/system (disabled by a preset), /etc/evictd/config.yaml
# and /etc/evictd/evictd.env kept on upgrade and removal. SHA256SUMS then
# lists them too.
# hack/package tests the .deb with dpkg.
package: release
	$(GO) run ./hack/package -version '$(VERSION)' -dist $(DIST) -arch '$(RELEASE_ARCHES)' > $(DIST)/.packages
	cd $(DIST) && sha256sum $(RELEASE_BINS) $$(cat .packages) > SHA256SUMS && rm .packages

# The container image of the release binaries, built without a Docker
# daemon (hack/image, go-containerregistry): $(DIST)/evictd-image-$(VERSION).oci.tar,
# an OCI image layout of one multi-architecture image, $(IMAGE_REPO):$(VERSION),
# static binary at /usr/bin/evictd on an empty base. Load it with
# `ctr -n k8s.io images import`, or push it with `crane push` or `skopeo
# copy oci-archive:...`. deploy/daemonset.yaml runs it.
IMAGE_REPO ?= ghcr.io/evictd/evictd
image: release
	$(GO) run ./hack/image -version '$(VERSION)' -repo '$(IMAGE_REPO)' -dist $(DIST) -arch '$(RELEASE_ARCHES)'

# Runs the agent on this host until Ctrl-C: it reads this machine's memory,
# filesystems and PIDs, decides, and serves metrics; with no --kubeconfig it
# evicts nothing.
run: build
	@echo "evictd: metrics on http://$(RUN_ADDR)/metrics, status with: $(BIN) status --metrics-bind-address $(RUN_ADDR)"
	$(BIN) --metrics-bind-address $(RUN_ADDR) --root-dir $(RUN_ROOT_DIR) $(RUN_ARGS)

# The tests' Kubernetes and containerd, built from the Go module proxy into
# .cache/bin (git-ignored), once per version; the first time, with Go's
# caches empty, about 11 minutes on 2 cores for node-bins and 10 for the
# previous kubelet; seconds afterwards (hack/build-k8s.sh): etcd, the control
# plane (kube-apiserver, kube-controller-manager, kube-scheduler) and the
# kubelet of today's node with its containerd and runc shim (the real-node
# tests' default lane: node-bins), and the previous lane's kubelet, which
# runs on the node's packaged containerd (`make runtime`; previous-bins).
# The versions are pinned in hack/tools/{k8s,k8s-previous,containerd,etcd}/go.mod.
.PHONY: node-bins previous-bins
k8s-bins:
	hack/build-k8s.sh
node-bins:
	hack/build-k8s.sh node
previous-bins:
	hack/build-k8s.sh previous

# helm and kustomize, for the tests of deploy/chart/evictd and
# deploy/kustomize, built from the Go module proxy into .cache/bin
# (git-ignored), once per version (hack/tools/{helm,kustomize}/go.mod).
tools:
	hack/build-tools.sh

# deploy/*.yaml from the chart (deploy/chart/evictd) with its default
# values: the chart is their source; TestManifestsCurrent fails when they
# differ.
manifests: tools
	$(GO) test -count=1 -run '^TestManifestsCurrent$$' ./deploy/ -update

# docs/reference: every command and flag as Markdown, written by `evictd
# completion markdown` from the flag definitions (TestReferenceCurrent
# fails while it is stale).
.PHONY: docs
docs: build
	rm -f docs/reference/*.md
	$(BIN) completion markdown docs/reference

# containerd and runc from Debian's packages, for the tests that run a real
# container runtime (installed as root; a no-op when present).
runtime:
	hack/install-runtime.sh

# rpm, to read the .rpm of `make package` in its test (installed as root,
# a no-op when present).
rpm-tools:
	hack/install-rpm.sh

# qemu, Debian's kernel and busybox-static, for the tests that boot a
# cgroup v2 guest (internal/testing/testvm; installed as root, a no-op when
# present).
vm:
	hack/install-vm.sh

# The cgroup v2 tests alone: a qemu guest on the unified hierarchy boots,
# evictd's signals, pod stats and wake-ups are checked against its kernel
# (cgroupfs and systemd layouts), the unit runs under systemd 252 as PID 1,
# and a whole node (containerd, kubelet, evictd) runs in the guest against
# a control plane on this machine, the systemd guest's also running the
# soft, PID, evictd-restart, disk and static-pod scenarios. One guest at a
# time. As root; 18 minutes here (2026-11-29). `make test` runs the guests'
# allocatable scenario only (E2E_V2_GUEST_RUN).
test-v2: vm node-bins runtime build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) test -p 1 -count=1 -timeout 50m -v -run '^(TestBootCgroupV2|TestForward|TestCgroupV2Node|TestSystemdNode|TestKubeletV2Node)$$' ./internal/testing/testvm/ ./e2e/guest/ ./e2e/node/

# A whole node on this machine (control plane, containerd, a real kubelet)
# with evictd beside it: one memory eviction told as it happens, then
# everything stopped (Ctrl-C too). As root; DEMO_ARGS=--hold keeps the node up.
demo: node-bins runtime build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) run ./hack/demo $(DEMO_ARGS)

# Every test. Once today's node can run (the runtime, the guest's qemu,
# evictd, and node-bins), two things run side by side:
# - the real-node scenarios of e2e/node's default lane (e2e-default);
# - at a lower CPU priority (TIER1_NICE): the checks (vet, fmt-check, the
#   Prometheus rules) and tier 1 (test-tier1: the packages' own tests
#   against real cgroups, containerd, API servers and whole nodes, the
#   end-to-end tiers of e2e/host, e2e/apiserver and e2e/guest (e2e/doc.go),
#   then fuzz-short), after the tools they need (test-beside); beside
#   them the previous lane's kubelet build (previous-bins); once both
#   have ended, the previous lane's scenarios (e2e-previous), still
#   beside the default lane's, which last longest.
# On a fresh machine the builds then cost the default lane's scenarios'
# wait only for what today's node needs, not for helm, kustomize and the
# previous kubelet too. They can share the machine: each node has its own
# containerd, API server, ports, bridge and cgroups, its memory thresholds
# are on its own kubepods cgroup, its disks are loop-mounted, and no
# scenario reads a machine-wide figure another test moves; the lower
# priority keeps the default lane's races as they are on a machine of
# their own. The one scenario that changes the machine for everyone, the
# chaos matrix's clock step (the real-time clock an hour forward and
# back), runs alone at the end (e2e-clock). Fails if any part fails,
# after all have run.
TIER1_NICE ?= 10
E2E_SKIP_BESIDE ?= ^(TestKubeletV2Node|TestChaosNode)/^(cgroupfs|clock_stepped)
test: runtime vm build node-bins
	@rc=$$(mktemp -d); \
	{ nice -n $(TIER1_NICE) $(MAKE) --no-print-directory previous-bins & previous=$$!; \
	  t1=0; nice -n $(TIER1_NICE) $(MAKE) --no-print-directory test-beside || t1=$$?; echo $$t1 > $$rc/t1; \
	  prev=0; { wait $$previous && nice -n $(TIER1_NICE) $(MAKE) --no-print-directory e2e-previous; } || prev=$$?; echo $$prev > $$rc/prev; \
	} & beside=$$!; \
	e2e=0; $(MAKE) --no-print-directory e2e-default E2E_SKIP='$(E2E_SKIP_BESIDE)' || e2e=$$?; \
	wait $$beside; t1=$$(cat $$rc/t1 2>/dev/null || echo 1); prev=$$(cat $$rc/prev 2>/dev/null || echo 1); rm -rf $$rc; \
	clock=0; $(MAKE) --no-print-directory e2e-clock || clock=$$?; \
	echo "make test: checks and tier 1 exit $$t1, e2e/node exit $$e2e, its previous lane exit $$prev, its clock step exit $$clock"; \
	[ $$t1 -eq 0 ] && [ $$e2e -eq 0 ] && [ $$prev -eq 0 ] && [ $$clock -eq 0 ]

# What runs beside the default lane in make test: the checks, the tools
# tier 1 needs, then tier 1.
.PHONY: test-beside
test-beside: vet fmt-check tools rpm-tools monitoring-check
	@$(MAKE) --no-print-directory test-tier1

# The chaos matrix's clock step alone (TestChaosNode): it steps this
# machine's real-time clock an hour forward and back, which every other
# test running then would see; make test runs it once tier 1 has ended.
.PHONY: e2e-clock
e2e-clock:
	EVICTD_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 10m -run '^TestChaosNode$$/^clock_stepped' ./e2e/node/

# Tier 1 alone, without its prerequisites: every package but e2e/node,
# then fuzz-short.
.PHONY: test-tier1
test-tier1:
	EVICTD_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -v '/e2e/node$$')
	$(MAKE) --no-print-directory fuzz-short

# The Prometheus rules of deploy/monitoring: promtool (Debian's prometheus
# package, installed as root when missing) checks them and runs their unit
# tests, every alert firing and not firing. Part of `make test`.
.PHONY: monitoring-check
monitoring-check:
	hack/install-prometheus.sh
	@if command -v promtool >/dev/null 2>&1; then \
		promtool check rules deploy/monitoring/evictd-rules.yaml && \
		promtool test rules deploy/monitoring/tests/*.yaml; \
	else echo "monitoring-check: no promtool; skipped"; fi

# Every parser of operator or kernel input fuzzed, one target after another,
# FUZZTIME each (about 7 minutes at the default): the threshold settings, the
# KubeletConfiguration, evictd's own configuration (AgentConfiguration, and
# its drop-ins) and node-config.yaml files, snapshots, the cgroup
# and /proc files, the pods tenants write and the container runtime's
# replies. Their seed corpora (testdata/fuzz/) also run as plain
# tests in `go test`; an input that fails is written there and stays a seed.
FUZZTIME     ?= 30s
FUZZPARALLEL ?= 1
# How long each new interesting input is minimized: go test's default.
FUZZMINIMIZE ?= 60s
FUZZ_TARGETS := \
	./thresholds/:FuzzParse \
	./internal/config/:FuzzKubeletConfig \
	./internal/config/:FuzzAgentConfig \
	./internal/config/:FuzzNodeConfig \
	./internal/snapshot/:FuzzSnapshot \
	./signals/host/:FuzzMemoryStat \
	./signals/host/:FuzzMeminfo \
	./signals/host/:FuzzLoadavg \
	./signals/host/:FuzzCgroupFiles \
	./signals/host/:FuzzPSI \
	./signals/host/:FuzzHugetlb \
	./internal/wakeup/:FuzzMemoryEvents \
	./internal/podsource/:FuzzConvert \
	./internal/cri/:FuzzRuntimeUsage

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) -parallel $(FUZZPARALLEL) $$pkg || exit 1; \
	done

# A short run of every fuzz target, part of `make test`: a count of inputs,
# not a duration. Go 1.26's fuzz coordinator can fail a target with a bare
# "context deadline exceeded" when a duration ends while a worker is busy
# (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline to race.
# Each new interesting input is minimized for a count of runs too: at the
# default 60 s, minimizing one input stalled FuzzAgentConfig's run for a
# minute (97 s in all; 53-59 s with 200x). A failing input is minimized as
# far as the count goes and written as before. About 3 minutes in all.
FUZZ_SHORT ?= 5000x
FUZZ_SHORT_MINIMIZE ?= 200x
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SHORT) FUZZMINIMIZE=$(FUZZ_SHORT_MINIMIZE)

# The end-to-end scenarios on a real node (e2e/node): a real kubelet on
# containerd, evictd beside it; memory, allocatable, PIDs, disk, DaemonSet,
# PDB, ReplicaSet, evictd restarted under pressure, the chaos matrix
# (TestChaosNode), and the same node in a cgroup v2 guest, there only its
# allocatable memory eviction (E2E_V2_GUEST_RUN: the guest's other families
# add some 20 minutes, beyond make test's budget; make test-v2 runs them
# all). Then the previous lane (e2e-previous). As root; about 35 minutes.
# `make e2e` is the same tier; e2e-run runs it without the prerequisites.
# The whole node in the guest runs there with the systemd driver under
# systemd as PID 1, as production nodes do; its cgroupfs twin (some 2
# minutes) only in make test-v2 (E2E_SKIP).
E2E_V2_GUEST_RUN ?= ^allocatable
E2E_SKIP ?= ^TestKubeletV2Node$$/^cgroupfs
e2e e2e-node: k8s-bins runtime build
	$(MAKE) --no-print-directory e2e-run

e2e-run: e2e-default
	$(MAKE) --no-print-directory e2e-previous

# The default lane's scenarios alone, without the prerequisites.
.PHONY: e2e-default
e2e-default:
	@eval "$$(hack/build-k8s.sh --print-env)" && echo "e2e/node, default lane: $$($$EVICTD_K8S_BIN_DIR/kubelet --version), $$($$EVICTD_CONTAINERD_BIN_DIR/containerd --version)"
	EVICTD_BIN=$(abspath $(BIN)) EVICTD_V2_GUEST_RUN='$(E2E_V2_GUEST_RUN)' $(GO) test -count=1 -timeout 60m -skip '$(E2E_SKIP)' ./e2e/node/

# The previous lane (EVICTD_NODE_LANE=previous): the memory, disk and
# runtime-fault scenarios again on the previous kubelet with the node's
# packaged containerd 1.6, against the same control plane; a few minutes.
E2E_PREVIOUS ?= ^(TestMemoryNode|TestDiskNode|TestNodeFaults)$$/^(allocatable|containerd_down)
.PHONY: e2e-previous
e2e-previous:
	@eval "$$(hack/build-k8s.sh --print-env)" && echo "e2e/node, previous lane: $$($$EVICTD_K8S_PREVIOUS_BIN_DIR/kubelet --version), $$(containerd --version)"
	EVICTD_BIN=$(abspath $(BIN)) EVICTD_NODE_LANE=previous $(GO) test -count=1 -timeout 20m -run '$(E2E_PREVIOUS)' ./e2e/node/

# The tier of the binary alone on this host (e2e/host): systemd notify,
# socket activation, its port taken, its own user, this host's cgroups and
# filesystems, JSON logs to the journal, `evictd status` against a running
# agent, `make install`. Some cases need root or cgroup v1 and skip without.
e2e-host: build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 10m ./e2e/host/

# The tier where the test plays the kubelet (e2e/apiserver): evictd
# against a real kube-apiserver, with pod memory in real cgroup v1 pod
# cgroups (TestAPIServerE2E) and pod containers in a real containerd on
# small loop-mounted filesystems (TestDiskE2E). As root; about 2.5 minutes.
e2e-apiserver: node-bins runtime build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 20m ./e2e/apiserver/

# The cgroup v2 guest's tier (e2e/guest): evictd alone in a qemu guest on
# the unified hierarchy, against the kernel's files, with the cgroupfs and
# systemd layouts, and `make install`'s unit under systemd as PID 1; one
# guest at a time. As root; about a minute and a half. The whole node in a
# guest, TestKubeletV2Node, is the node tier's; `make test-v2` runs both.
e2e-guest: vm build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 20m ./e2e/guest/

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

# Benchmarks of one full pass and of the pure stages, then the agent's idle
# cost; figures go to docs/BENCHMARKS.md by hand, with these commands.
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./internal/manager/ ./internal/recorder/ ./thresholds/ ./ranking/ | tee bench.out
	./hack/idle-cost.sh $(BIN) 60 --root-dir $(RUN_ROOT_DIR) | tee -a bench.out

# The same memory scenario on one real node with the kubelet's own eviction
# and with evictd (kubelet thresholds off), at several allocation rates: a
# table of medians on stdout and in bench-node.out, evictd's targets, and
# a chart per side beside it. As root; about 10 min.
# BENCH_NODE_ARGS e.g. --sides kubelet,evictd --rates 200 --reps 5.
# The tables and charts again from earlier outputs, without a node:
#   go run ./hack/benchnode --from a.out,b.out --out again.out --sides ... --rates ... --threshold-mib ...
.PHONY: bench-node bench-node-v2 bench-v2
bench-node: node-bins runtime build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) run ./hack/benchnode $(BENCH_NODE_ARGS)

# The same grid on cgroup v2 against a real kubelet: the node (containerd,
# the kubelet, evictd) in the qemu guest of test-v2, the control plane
# here, every amount of memory divided by the guest's slowdown measured in
# the same run (times stay native). Sides kubelet, evictd, evictd-tte (the
# kubelet has no memcg notification on v2). As root; the node's start
# takes about 6 minutes, each run about half a minute.
# BENCH_NODE_V2_ARGS e.g. --rates 200,800 --threshold-mib 500 --reps 3.
BENCH_NODE_V2_ARGS ?= --sides kubelet,evictd,evictd-tte
bench-node-v2: vm node-bins runtime build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) run ./hack/benchnode --guest --out bench-node-v2.out $(BENCH_NODE_V2_ARGS)

# How soon evictd decides after a memory threshold is crossed on a cgroup
# v2 kernel (the qemu guest of test-v2), against the kubelet's 10 s polling
# model, at allocation rates scaled to the guest's measured slowdown;
# reported as shares of the time the headroom lasts, never as times. As
# root; BENCH_V2_RUNS runs per rate (default 10), about a minute each.
BENCH_V2_RUNS ?= 10
bench-v2: vm build
	EVICTD_BIN=$(abspath $(BIN)) EVICTD_BENCH_V2=$(BENCH_V2_RUNS) $(GO) test -count=1 -timeout 60m -v -run '^TestBenchV2$$' ./e2e/guest/ | tee bench-v2.out

# What N evictd agents cost one shared API server: a real control plane
# (etcd, kube-apiserver with an audit log, kube-controller-manager), N
# simulated nodes each with pods, an emulated kubelet (the baseline) and a
# real evictd process on a generated /proc and cgroup tree, through the
# scenarios idle (10 min), memory pressure on 20% of the nodes, a 60 s API
# server outage and a restart of every agent; every request counted from
# the audit log. Tables and budgets on stdout and in bench-fleet.out. No
# root, containerd or kubelet needed. BENCH_FLEET_ARGS e.g. --nodes 250,
# --scenarios idle --idle 3m, --dir /tmp/fleet (keeps every log).
.PHONY: bench-fleet
bench-fleet: node-bins build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) run ./hack/benchfleet $(BENCH_FLEET_ARGS)

# /etc/evictd holds evictd's credentials (kubeconfig, token, TLS key) as
# well as its configuration file (config.yaml, which the unit names) and
# environment file: root's alone (0700), an existing directory made so too.
# evictd refuses a credential file that group or others can read or write.
# Existing config.yaml and evictd.env are kept: an upgrade from a release
# without config.yaml gets it, and its evictd.env's flags still override it.
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/evictd
	install -D -m 0644 systemd/evictd.service $(DESTDIR)$(UNITDIR)/evictd.service
	install -D -m 0644 systemd/evictd.socket $(DESTDIR)$(UNITDIR)/evictd.socket
	install -D -m 0644 systemd/evictd.service.d/api-server.conf.example $(DESTDIR)$(UNITDIR)/evictd.service.d/api-server.conf.example
	install -D -m 0644 systemd/evictd.service.d/own-user.conf.example $(DESTDIR)$(UNITDIR)/evictd.service.d/own-user.conf.example
	install -d -m 0700 $(DESTDIR)$(SYSCONF)/evictd
	@for f in config.yaml evictd.env; do \
		if [ -e $(DESTDIR)$(SYSCONF)/evictd/$$f ]; then \
			echo "keeping existing $(DESTDIR)$(SYSCONF)/evictd/$$f"; \
		else \
			install -m 0600 systemd/$$f $(DESTDIR)$(SYSCONF)/evictd/$$f; \
		fi; \
	done
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/evictd $(DESTDIR)$(UNITDIR)/evictd.service $(DESTDIR)$(UNITDIR)/evictd.socket \
		$(DESTDIR)$(UNITDIR)/evictd.service.d/api-server.conf.example $(DESTDIR)$(UNITDIR)/evictd.service.d/own-user.conf.example

clean:
	rm -rf bin bench.out $(DIST)

# evictd over a long run on one real node: pods created and deleted all the
# time, a hog evicted every few minutes, and evictd's RSS, goroutines and
# open fds sampled every 10 s; fails when one of them trends upward, evictd
# restarts or a pod is OOM-killed. Not part of `test`. As root; an hour by
# default (SOAK_ARGS e.g. --duration 10m); samples.csv, summary.md and
# evictd.log in soak-out/.
.PHONY: soak
soak: node-bins runtime build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) run ./hack/soak --out soak-out $(SOAK_ARGS)

# evictd's own cost beside a real kubelet with 110 and 250 running pods:
# CPU, RSS (anon and file), fds, goroutines and pass duration over 60 s
# each, as a markdown table, evictd under the unit's GOGC and GOMEMLIMIT.
# As root; about 10 min. COST_NODE_ARGS e.g. --pods 110 --window 120s, or
# --compare /tmp/old,bin/evictd --rounds 3 for two builds side by side.
.PHONY: bench-cost
bench-cost: node-bins runtime build
	EVICTD_BIN=$(abspath $(BIN)) $(GO) run ./hack/costnode $(COST_NODE_ARGS)
