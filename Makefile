# SPDX-License-Identifier: Apache-2.0
#
# make              build BPF object, skeleton, devgated, devgatectl, helpers
# make test         unit tests (cmocka) and integration tests (bats)
# make check-asan   the same, built with ASan and UBSan into build-asan/
# make lint         clang-format, the dependency rules (scripts/depgraph.sh), cppcheck,
#                   clang-tidy, shellcheck, ARCHITECTURE.md's folder table current
# make format       apply .clang-format to every C file
# make demo         live grant/revoke in a runc container on a demo fixture
# make man          man pages from man/*.scd (scdoc) into $(O)/man
# make install      DESTDIR=, PREFIX= (/usr/local); config and unit go to /etc and /lib
# make deb          $(O)/devgate_VERSION_ARCH.deb, built with dpkg-buildpackage (debian/)
# make systemd-host the .deb installed and run on Debian 12 and 13 booted with systemd
#                   (nspawn); SYSTEMD_SUITES=bookworm leaves Debian 13 out
#
# V=1 shows the commands; O=DIR builds elsewhere.

.DELETE_ON_ERROR:
.SUFFIXES:
.DEFAULT_GOAL := all

V ?= 0
ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-9s %s\n' "$(1)" "$(2)";
endif

O ?= build
SAN ?= 0
CC := gcc
CLANG ?= clang
BPFTOOL ?= bpftool
PKG_CONFIG ?= pkg-config
BATS ?= bats
VERSION := 0.1.0

MULTIARCH := $(shell $(CC) -dumpmachine)
PKGS := libbpf json-c libcap libseccomp libmicrohttpd
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
# Runtimes start devgate-hook twice per container, and loading shared
# libraries is most of its start-up: static (PIE, so still randomised), it
# starts ~0.4 ms sooner (bench/NOTES.md). HOOK_STATIC=0 links it like the
# others, as sanitizer builds must.
HOOK_STATIC ?= 1
ifeq ($(SAN),1)
HOOK_STATIC := 0
endif
HOOK_PKGS := json-c libcap libseccomp
HOOK_LDFLAGS := $(if $(filter 1,$(HOOK_STATIC)),-static-pie)
HOOK_LIBS := $(shell $(PKG_CONFIG) --libs $(if $(HOOK_LDFLAGS),--static) $(HOOK_PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes \
	-Wmissing-prototypes -Wpointer-arith -Wundef -Wvla -Wno-missing-field-initializers
CFLAGS ?= -O2 -g
ifeq ($(SAN),1)
CFLAGS += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
else
CFLAGS += -D_FORTIFY_SOURCE=2
endif
# Each binary depends only on the libraries it calls (devgate-hook: no libbpf).
LDFLAGS += -Wl,--as-needed
ALL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -DDEVGATE_VERSION='"$(VERSION)"' \
	-fstack-protector-strong -MMD -MP $(CFLAGS) $(PKG_CFLAGS)
CPPFLAGS += -Icommon -Ibpf -I$(O)

BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf -I/usr/include/$(MULTIARCH) -Ibpf

COMMON_SRC := $(wildcard common/*.c)
# devgated: daemon/*.c and its folders (each folder's README.md says what it
# holds). daemon/helper/node_main.c is devgated-node's main, not devgated's.
DAEMON_SRC := $(filter-out daemon/helper/node_main.c,$(wildcard daemon/*.c daemon/*/*.c))
CLI_SRC := $(filter-out cli/hook_main.c,$(wildcard cli/*.c))
UNIT_SRC := $(wildcard tests/unit/test_*.c)

COMMON_OBJ := $(COMMON_SRC:%.c=$(O)/%.o)
# An archive, so each binary carries only the common objects it calls.
COMMON_LIB := $(O)/common/libdevgate-common.a
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(O)/%.o) $(O)/daemon/node/node_blob.o
DAEMON_LIB_OBJ := $(filter-out $(O)/daemon/main.o,$(DAEMON_OBJ))
CLI_OBJ := $(CLI_SRC:%.c=$(O)/%.o)
CLI_LIB_OBJ := $(filter-out $(O)/cli/main.o,$(CLI_OBJ))
# devgate-hook: the hook alone, without libbpf and friends (see cli/hook_main.c).
HOOK_OBJ := $(addprefix $(O)/cli/,hook_main.o cmd_hook.o oci.o client.o output.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/%)

# devgate-k8s (k8s/): the kubelet device plugin. Its devgated side and its
# decisions are C (unit-tested with the rest); the gRPC server is C++, with
# Debian's grpc++ and protobuf, generated from kubelet's own k8s/api.proto.
# The tests' kubelet stand-in uses Python stubs generated from the same file.
CXX := g++
PROTOC ?= protoc
GRPC_CPP_PLUGIN ?= /usr/bin/grpc_cpp_plugin
GRPC_PYTHON_PLUGIN ?= /usr/bin/grpc_python_plugin
K8S_PKGS := grpc++ protobuf
# dpkg-buildflags gives C++ its own flags (trixie's CFLAGS hold C-only ones).
CXXFLAGS ?= $(CFLAGS)
K8S_CXXFLAGS := -std=c++17 -Wall -Wextra -Werror -D_GNU_SOURCE -DDEVGATE_VERSION='"$(VERSION)"' \
	-fstack-protector-strong -MMD -MP $(CXXFLAGS) \
	$(shell $(PKG_CONFIG) --cflags $(K8S_PKGS) 2>/dev/null)
K8S_LIBS := $(shell $(PKG_CONFIG) --libs $(K8S_PKGS) json-c libcap 2>/dev/null)
K8S_C_SRC := $(wildcard k8s/*.c)
K8S_GEN := $(O)/k8s/api.pb.cc $(O)/k8s/api.grpc.pb.cc
K8S_OBJ := $(O)/k8s/main.o $(K8S_GEN:%.cc=%.o) $(K8S_C_SRC:%.c=$(O)/%.o) $(O)/cli/client.o
K8S_PY := $(O)/k8s/py/api_pb2.py $(O)/k8s/py/api_pb2_grpc.py

SKEL := $(O)/devgate.skel.h $(O)/attach_watch.skel.h
BINS := $(O)/devgated $(O)/devgatectl $(O)/devgate-hook $(O)/devgate-k8s $(O)/probe \
	$(O)/displace $(O)/preattach $(O)/moveprobe $(O)/openloop $(O)/threadopen $(O)/samepid $(O)/runtime_like.bpf.o $(K8S_PY) $(O)/dlprobe $(O)/cudaprobe $(O)/fakedrv.so $(O)/fakenvml.so \
	$(O)/memlock_shim.so

BENCH_BIN := $(O)/bench/dgload $(O)/bench/floor $(O)/bench/opencost $(O)/bench/lxcload

.PHONY: all test unit integration integration-no-openat2 torture fuzz fuzz-smoke check-asan lint format clean demo bench
all: $(BINS)

$(O)/devgate.bpf.o: bpf/devgate.bpf.c bpf/devgate.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(O)/runtime_like.bpf.o: tests/helpers/runtime_like.bpf.c
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(O)/attach_watch.bpf.o: bpf/attach_watch.bpf.c bpf/devgate.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(O)/devgate.skel.h: $(O)/devgate.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name devgate > $@

$(O)/attach_watch.skel.h: $(O)/attach_watch.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name attach_watch_bpf > $@

$(O)/%.o: %.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) -c $< -o $@

# Daemon code includes the skeleton; make sure it exists first. Its folders'
# headers are named from daemon/: #include "lease/lease.h".
$(DAEMON_OBJ) $(UNIT_BIN): | $(SKEL)
$(DAEMON_OBJ): CPPFLAGS += -Idaemon

$(COMMON_LIB): $(COMMON_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@
	$(Q)$(AR) rcs $@ $^

$(O)/devgated: $(DAEMON_OBJ) $(COMMON_LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# devgated-node: the zygote devgated executes at start (daemon/node/zygote.c),
# built from daemon/helper/ alone. Static and libc only, so each helper it
# forks copies and frees a few mappings; built without sanitizers, and
# carried inside devgated. Nothing else is linked in: a call from
# daemon/helper/ to any other folder fails here (and in make lint).
NODE_SRC := $(wildcard daemon/helper/*.c)
NODE_HDR := $(wildcard daemon/helper/*.h) common/gpu.h
$(O)/devgated-node: $(NODE_SRC) $(NODE_HDR)
	$(call msg,CC-STATIC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -O2 -D_FORTIFY_SOURCE=2 \
		-fstack-protector-strong -Icommon -static-pie -s -o $@ $(NODE_SRC)

$(O)/daemon/node/node_blob.o: daemon/node/node_blob.S $(O)/devgated-node
	$(call msg,AS,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c -DNODE_BIN='"$(abspath $(O))/devgated-node"' -o $@ $<

$(O)/devgatectl: $(CLI_OBJ) $(COMMON_LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(O)/devgate-hook: $(HOOK_OBJ) $(COMMON_LIB)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $(HOOK_LDFLAGS) -o $@ $^ $(HOOK_LIBS)

$(O)/k8s/api.pb.cc $(O)/k8s/api.pb.h &: k8s/api.proto
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(PROTOC) -Ik8s --cpp_out=$(@D) $<

$(O)/k8s/api.grpc.pb.cc $(O)/k8s/api.grpc.pb.h &: k8s/api.proto
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(PROTOC) -Ik8s --grpc_out=$(@D) --plugin=protoc-gen-grpc=$(GRPC_CPP_PLUGIN) $<

$(K8S_PY) &: k8s/api.proto
	$(call msg,PROTOC,$(O)/k8s/py)
	$(Q)mkdir -p $(O)/k8s/py
	$(Q)$(PROTOC) -Ik8s --python_out=$(O)/k8s/py --grpc_python_out=$(O)/k8s/py \
		--plugin=protoc-gen-grpc_python=$(GRPC_PYTHON_PLUGIN) $<

$(O)/k8s/%.o: $(O)/k8s/%.cc $(O)/k8s/api.pb.h $(O)/k8s/api.grpc.pb.h
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(K8S_CXXFLAGS) -I$(O)/k8s -c $< -o $@

$(O)/k8s/main.o: k8s/main.cc $(O)/k8s/api.pb.h $(O)/k8s/api.grpc.pb.h
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(K8S_CXXFLAGS) -Icommon -Ik8s -I$(O)/k8s -c $< -o $@

$(O)/k8s/devgated.o: CPPFLAGS += -Icli

$(O)/devgate-k8s: $(K8S_OBJ) $(COMMON_LIB)
	$(call msg,LINK,$@)
	$(Q)$(CXX) $(LDFLAGS) -o $@ $^ $(K8S_LIBS)

# Dynamic on purpose: it loads driver libraries the way a CUDA program does.
$(O)/dlprobe: tests/helpers/dlprobe.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -o $@ $<

# Dynamic too: CUDA through libcuda.so.1, on hosts with a real GPU (demo, device checks).
$(O)/cudaprobe: tests/helpers/cudaprobe.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -o $@ $<

# A stand-in for every library of the driver in fixtures (mkfixture --driver).
$(O)/fakedrv.so: tests/helpers/fakedrv.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC -o $@ $<

# A fixture's libnvidia-ml (mkfixture --nvml): the calls devgated's NVML probe makes.
$(O)/fakenvml.so: tests/helpers/fakenvml.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC -o $@ $<

# crun in the tests, on a host without CAP_SYS_RESOURCE (tests/lib/crun.sh).
$(O)/memlock_shim.so: tests/helpers/memlock_shim.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC -o $@ $< -ldl

# Static, so it runs inside a bare busybox rootfs.
$(O)/probe: tests/helpers/probe.c
	$(call msg,CC-STATIC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -static -o $@ $<

$(O)/displace $(O)/preattach $(O)/moveprobe $(O)/openloop $(O)/samepid: $(O)/%: tests/helpers/%.c tests/helpers/cgjoin.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) $(LDFLAGS) -o $@ $< $(PKG_LIBS)

$(O)/threadopen: tests/helpers/threadopen.c tests/helpers/cgjoin.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) $(LDFLAGS) -pthread -o $@ $<

$(O)/tests/test_%: tests/unit/test_%.c $(DAEMON_LIB_OBJ) $(CLI_LIB_OBJ) $(COMMON_LIB)
	$(call msg,TEST-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) -Idaemon -Icli $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcmocka

# The lease transactions alone: daemon/grant/ and its pure neighbours, the kernel faked.
GRANT_TEST_OBJ := $(patsubst %.c,$(O)/%.o,$(wildcard daemon/grant/*.c)) $(addprefix $(O)/daemon/,\
	lease/alloc.o lease/lease.o view/view.o sys/fault.o lease/hostdev.o lease/policy.o sys/topo.o)
$(O)/tests/test_grant: tests/unit/test_grant.c tests/unit/fakes/kernel_fakes.c $(GRANT_TEST_OBJ) \
		$(COMMON_LIB)
	$(call msg,TEST-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) -Idaemon -Itests/unit $(LDFLAGS) -o $@ $^ $(PKG_LIBS) \
		-lcmocka

# devgate-k8s's decisions alone (k8s/devices.c), without gRPC.
$(O)/tests/test_k8s: tests/unit/test_k8s.c $(O)/k8s/devices.o $(COMMON_LIB)
	$(call msg,TEST-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) -Ik8s $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcmocka

$(O)/bench/dgload: bench/dgload.c $(O)/cli/client.o $(COMMON_LIB)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) -Icli $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(O)/bench/floor: bench/floor.c $(O)/common/util.o
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(O)/bench/opencost: bench/opencost.c
	$(call msg,CC-STATIC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -static -o $@ $<

$(O)/bench/lxcload: bench/lxcload.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(CPPFLAGS) $(LDFLAGS) -o $@ $< -llxc

# Figures go to bench/results.md and bench/scale.png; raw data to bench/out/.
bench: all $(BENCH_BIN)
	$(Q)bash bench/run.sh

unit: $(UNIT_BIN)
	$(call msg,UNIT,$(O)/tests)
	$(Q)set -e; for t in $(UNIT_BIN); do $$t; done

integration: $(BINS) $(O)/bench/lxcload $(O)/bench/dgload
	$(call msg,BATS,tests/integration)
	$(Q)DEVGATE_BUILD=$(abspath $(O)) $(BATS) tests/integration

# The node work again with openat2 forced to ENOSYS: the O_PATH walk fallback.
NODE_BATS := grant revoke attack hook
integration-no-openat2: $(BINS)
	$(call msg,BATS,no openat2: $(NODE_BATS))
	$(Q)DEVGATE_TEST_NO_OPENAT2=1 DEVGATE_BUILD=$(abspath $(O)) \
		$(BATS) $(NODE_BATS:%=tests/integration/%.bats)

test: unit integration integration-no-openat2 fuzz-smoke

# libFuzzer targets (tests/fuzz), built with clang and ASan/UBSan from the
# sources themselves. 'make fuzz' runs each for FUZZ_SECONDS on its seed
# corpus; 'make fuzz-smoke' (part of 'make test') for a few seconds.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 600
FUZZ_FLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -Icommon -Ibpf -Icli -Idaemon -I$(O) $(PKG_CFLAGS)
FUZZ_TARGETS := wire oci host
FUZZ_BIN := $(FUZZ_TARGETS:%=$(O)/fuzz/fuzz_%)
FUZZ_SRC_wire := $(COMMON_SRC)
FUZZ_SRC_oci := $(COMMON_SRC) cli/oci.c
FUZZ_SRC_host := $(COMMON_SRC) $(addprefix daemon/,core/config.c sys/confine.c lease/lease.c lease/record.c \
	sys/cgroup.c sys/listen_addr.c lease/policy.c inventory/rescan.c lease/hostdev.c inventory/nvml.c)

$(O)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(COMMON_SRC) $(wildcard cli/*.c) $(DAEMON_SRC) | $(SKEL)
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_SRC_$*) $(PKG_LIBS)

fuzz: $(FUZZ_BIN)
	$(Q)set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(O)/fuzz/corpus-$$t; \
		$(O)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
			$(O)/fuzz/corpus-$$t tests/fuzz/corpus/$$t; \
	done

fuzz-smoke: $(FUZZ_BIN)
	$(call msg,FUZZ,$(FUZZ_TARGETS))
	$(Q)set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(O)/fuzz/corpus-$$t; \
		if ! $(O)/fuzz/fuzz_$$t -max_total_time=5 -max_len=65536 -print_final_stats=1 \
			$(O)/fuzz/corpus-$$t tests/fuzz/corpus/$$t >$(O)/fuzz/$$t.log 2>&1; then \
			cat $(O)/fuzz/$$t.log; exit 1; fi; \
		printf '  fuzz_%-6s %s runs\n' $$t \
			"$$(sed -n 's/^stat::number_of_executed_units: *//p' $(O)/fuzz/$$t.log)"; \
	done

# The crash tests at length: every fault point 50 times; the /dev race 1,000.
torture: $(BINS)
	$(Q)DEVGATE_FAULT_ROUNDS=50 DEVGATE_BUILD=$(abspath $(O)) $(BATS) tests/integration/faults.bats
	$(Q)DEVGATE_RACE_ROUNDS=1000 DEVGATE_BUILD=$(abspath $(O)) $(BATS) \
		-f renameat2 tests/integration/attack.bats

check-asan:
	$(Q)$(MAKE) --no-print-directory O=build-asan SAN=1 test

# The longest include-and-call chain, in modules, that make lint allows.
MAX_DEPTH ?= 12

LINT_SRC := $(COMMON_SRC) $(DAEMON_SRC) $(CLI_SRC) cli/hook_main.c daemon/helper/node_main.c $(K8S_C_SRC)
LINT_SH := .ci/run $(wildcard scripts/*.sh bench/*.sh tests/lib/*.sh tests/hardware/*.sh tests/integration/*.bash \
	tests/integration/*.bats tests/systemd/*.sh) tests/helpers/mkfixture packaging/mkdeb.sh packaging/chroot-build.sh packaging/sources.sh \
	debian/devgate.postrm debian/devgate.prerm \
	packaging/bash-completion/devgatectl
FORMAT_SRC := $(sort $(wildcard common/*.[ch] daemon/*.[ch] daemon/*/*.[ch] cli/*.[ch] bpf/*.[ch] k8s/*.[ch] k8s/*.cc \
	tests/unit/*.c tests/unit/fakes/*.[ch] tests/fuzz/*.[ch] tests/helpers/*.c bench/*.c))

# .clang-format applied to every C file; 'make lint' fails on any difference.
format:
	$(Q)clang-format -i $(FORMAT_SRC)

lint: $(SKEL) $(BINS)
	$(call msg,FORMAT,$(words $(FORMAT_SRC)) files)
	$(Q)clang-format --dry-run -Werror $(FORMAT_SRC)
	$(call msg,DEPGRAPH,bpf common daemon cli k8s)
	$(Q)sh scripts/depgraph.sh --max-depth $(MAX_DEPTH) $(O)
	$(call msg,ARCH,ARCHITECTURE.md's table of folders)
	$(Q)sh scripts/arch-files.sh --check
	$(call msg,CPPCHECK,$(LINT_SRC))
	$(Q)cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--inline-suppr --suppress=missingIncludeSystem --std=c11 -D_GNU_SOURCE \
		--include=/usr/include/bpf/libbpf_common.h -Icommon -Ibpf -Idaemon -Icli -Ik8s -I$(O) $(LINT_SRC)
	$(call msg,TIDY,$(LINT_SRC))
	$(Q)clang-tidy --quiet $(LINT_SRC) -- \
		-std=gnu11 -D_GNU_SOURCE -Icommon -Ibpf -isystem $(O) -Idaemon -Icli -Ik8s $(PKG_CFLAGS) 2>&1 | \
		{ grep -v '^[0-9]* warnings generated' || true; }; \
		exit $${PIPESTATUS[0]}
	$(call msg,TIDY,k8s/main.cc)
	$(Q)clang-tidy --quiet k8s/main.cc -- -std=c++17 -D_GNU_SOURCE -DDEVGATE_VERSION='""' \
		-Icommon -Ik8s -isystem $(O)/k8s \
		$(shell $(PKG_CONFIG) --cflags $(K8S_PKGS) 2>/dev/null) 2>&1 | \
		{ grep -v '^[0-9]* warnings generated' || true; }; \
		exit $${PIPESTATUS[0]}
	$(call msg,SHELLCHECK,$(LINT_SH))
	$(Q)shellcheck -S warning $(LINT_SH)

demo: all
	$(Q)sh scripts/demo.sh --no-install

# ---- man pages, install, Debian package ----

SCDOC ?= scdoc
PREFIX ?= /usr/local
bindir ?= $(PREFIX)/bin
sbindir ?= $(PREFIX)/sbin
datadir ?= $(PREFIX)/share
mandir ?= $(datadir)/man
sysconfdir ?= /etc
unitdir ?= /lib/systemd/system
MAN := $(patsubst man/%.scd,$(O)/man/%,$(wildcard man/*.scd))
# The OCI hook's hooks.d entry, once it exists.
HOOK_JSON := $(wildcard packaging/hooks.d/devgate.json)

.PHONY: man install uninstall deb
man: $(MAN)

# '\" t on the first line: man runs tbl for scdoc's tables (lintian's
# groff-message where it does not).
$(O)/man/%: man/%.scd
	$(call msg,SCDOC,$@)
	$(Q)mkdir -p $(@D)
	$(Q){ echo "'\\\" t"; $(SCDOC) < $<; } > $@

# The shipped config is installed only where none is: never over an admin's.
install: $(O)/devgated $(O)/devgatectl $(O)/devgate-hook $(O)/devgate-k8s $(MAN)
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)install -D -m 0755 $(O)/devgated $(DESTDIR)$(sbindir)/devgated
	$(Q)install -D -m 0755 $(O)/devgate-k8s $(DESTDIR)$(sbindir)/devgate-k8s
	$(Q)install -D -m 0644 packaging/k8s/devgate-k8s.yaml \
		$(DESTDIR)$(datadir)/devgate/k8s/devgate-k8s.yaml
	$(Q)install -D -m 0755 $(O)/devgatectl $(DESTDIR)$(bindir)/devgatectl
	$(Q)install -D -m 0755 $(O)/devgate-hook $(DESTDIR)$(bindir)/devgate-hook
	$(Q)for m in $(MAN); do \
		d=$(DESTDIR)$(mandir)/man$${m##*.}; \
		install -d $$d && gzip -9n -c $$m > $$d/$${m##*/}.gz; \
	done
	$(Q)install -D -m 0644 packaging/bash-completion/devgatectl \
		$(DESTDIR)$(datadir)/bash-completion/completions/devgatectl
	$(Q)install -d $(DESTDIR)$(unitdir)
	$(Q)sed 's|/usr/sbin/devgated|$(sbindir)/devgated|' packaging/systemd/devgated.service \
		> $(DESTDIR)$(unitdir)/devgated.service
	$(Q)[ -e $(DESTDIR)$(sysconfdir)/devgate/devgate.conf ] || \
		install -D -m 0644 packaging/devgate.conf $(DESTDIR)$(sysconfdir)/devgate/devgate.conf
ifneq ($(HOOK_JSON),)
	$(Q)install -D -m 0644 $(HOOK_JSON) $(DESTDIR)$(datadir)/containers/oci/hooks.d/devgate.json
endif

# Leaves the configuration, like dpkg -r.
uninstall:
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)for m in $(MAN); do rm -f $(DESTDIR)$(mandir)/man$${m##*.}/$${m##*/}.gz; done
	$(Q)rm -f $(DESTDIR)$(sbindir)/devgated $(DESTDIR)$(bindir)/devgatectl \
		$(DESTDIR)$(sbindir)/devgate-k8s $(DESTDIR)$(datadir)/devgate/k8s/devgate-k8s.yaml \
		$(DESTDIR)$(bindir)/devgate-hook \
		$(DESTDIR)$(datadir)/bash-completion/completions/devgatectl \
		$(DESTDIR)$(unitdir)/devgated.service \
		$(DESTDIR)$(datadir)/containers/oci/hooks.d/devgate.json

# debian/ and dpkg-buildpackage, in a copy of the tree (packaging/mkdeb.sh).
deb:
	$(call msg,DEB,$(O))
	$(Q)mkdir -p $(O) && sh packaging/mkdeb.sh $(O)

# The .deb on Debian booted with systemd as PID 1 in systemd-nspawn
# (tests/systemd/): Debian 12 and 13. Debian 12's .deb is 'make deb's,
# Debian 13's is built in a trixie chroot and passes its lintian
# (packaging/chroot-build.sh; CI starts it beside the tests, scripts/test.sh);
# either is rebuilt when its sources changed.
SYSTEMD_SUITES ?= bookworm trixie
.PHONY: systemd-host
systemd-host: $(O)/probe
	$(Q)for s in $(SYSTEMD_SUITES); do \
		if [ $$s = bookworm ]; then deb=$$(sh packaging/mkdeb.sh --if-stale $(O)); \
		else deb=$$(sh packaging/chroot-build.sh --if-stale $$s $(O)); fi && \
		DEVGATE_BUILD=$(O) sh tests/systemd/run.sh $$deb $$s || exit 1; \
	done

clean:
	$(call msg,CLEAN,$(O))
	$(Q)rm -rf build build-asan

SHELL := /bin/bash
-include $(shell find $(O) -name '*.d' -type f 2>/dev/null)
