# SPDX-License-Identifier: GPL-2.0-or-later
# Shared-disk cluster filesystem and volume manager.  See README.md.
#
#   make            build libraries and tools into build/
#   make check      every test, built with -fsanitize=address,undefined into build/asan/
#   make stress     the tests under CPU pressure, on one core, with a slow disk (long)
#   make demo       the newcomer's tour on LUN files in a temporary directory
#   make bench      benchmarks (long; not part of check)
#   make install    PREFIX=/usr/local DESTDIR= (the mount helpers go in SBINDIR=/sbin, where
#                   mount(8) and umount(8) look for them)
#   make deb        Debian packages (cfs-utils, libodm, libodm-dev) into build/deb/
#   make clean

PREFIX ?= /usr/local
SBINDIR ?= /sbin
LIBDIR ?= $(PREFIX)/lib
SYSTEMDDIR ?= $(PREFIX)/lib/systemd/system
DESTDIR ?=
BUILD ?= build
CC ?= gcc

CFLAGS_COMMON := -std=c17 -Wall -Wextra -Werror -D_GNU_SOURCE -g -fPIC -I. -I$(BUILD) \
	-I/usr/include/fuse3
ifeq ($(SANITIZE),1)
  CFLAGS_OPT := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS_SAN := -fsanitize=address,undefined
else
  CFLAGS_OPT := -O2
endif
CFLAGS_ALL = $(CFLAGS_COMMON) $(CFLAGS_OPT) $(CFLAGS)
LDLIBS_CVM := -laio -lpthread

CVM_SRC := $(wildcard cvm/*.c)
CVM_OBJ := $(CVM_SRC:%.c=$(BUILD)/%.o)
LOCK_SRC := $(wildcard dlm-client/*.c)
LOCK_OBJ := $(LOCK_SRC:%.c=$(BUILD)/%.o) $(BUILD)/proto/cfslock.pb-c.o
LDLIBS_LOCK := -lcpg -lquorum -ldlm -lprotobuf-c -lpthread
CFSD_SRC := $(wildcard cfsd/*.c)
CFS_SRC := $(wildcard cfs/*.c)
CFS_OBJ := $(CFS_SRC:%.c=$(BUILD)/%.o)
TOOLS_COMMON_OBJ := $(BUILD)/tools/common.o $(BUILD)/tools/version.o
CFS_TOOLS := $(BUILD)/bin/mkfs.cfs $(BUILD)/bin/fsck.cfs $(BUILD)/bin/cfs $(BUILD)/bin/cfsd
ODM_TOOLS := $(BUILD)/bin/odmstat $(BUILD)/bin/odmload
TOOLS := $(BUILD)/bin/cvm $(BUILD)/bin/randio $(BUILD)/bin/cfslock $(CFS_TOOLS) $(ODM_TOOLS)
UNIT_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/*/test_*.c))
LIBS := $(BUILD)/lib/libcfs.a $(BUILD)/lib/libcvm.a $(BUILD)/lib/libcfslock.a
# libodm.so carries what it needs of libcvm and the control protocol: a database loads one file.
ODM_SRC := $(wildcard odm/*.c)
ODM_OBJ := $(ODM_SRC:%.c=$(BUILD)/%.o) $(BUILD)/cfs/control.o $(BUILD)/proto/control.pb-c.o $(CVM_OBJ)
LDLIBS_ODM := -lprotobuf-c -laio -lpthread

.SECONDARY:
.PHONY: FORCE all deps deb check check-build compat-builds stress poc demo soak bench bench-cvm bench-locks bench-cfs bench-odm bench-cluster bench-home xfstests install clean lint
all: deps $(LIBS) $(BUILD)/lib/libcvm.so $(BUILD)/lib/libodm.so $(TOOLS) $(BUILD)/bin/cfs-fence

# Installs what is missing (apt-get, as root); a no-op once everything is there.  Compiling
# waits for it (order-only), so `make -j` on a fresh machine does not run protoc-c first.
deps:
ifneq ($(SKIP_DEPS),1)
	@scripts/deps.sh
endif

# The commit a build comes from, for --version; rewritten only when it changes.
$(BUILD)/build_id.h: FORCE
	@mkdir -p $(BUILD)
	@id=$${CFS_BUILD_ID:-$$(git describe --tags --always --dirty 2>/dev/null || echo "a tree outside git")}; \
	echo "#define CFS_BUILD_ID \"$$id\"" >$@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/tools/version.o: $(BUILD)/build_id.h

# The fence agent is a shell script; its --version is the release's.
$(BUILD)/bin/cfs-fence: tools/cfs-fence release.h
	@mkdir -p $(@D)
	sed "s/@RELEASE@/$$(sed -n 's/.*CFS_RELEASE "\(.*\)"/\1/p' release.h)/" $< >$@
	chmod 755 $@

# Wire messages: generated from proto/*.proto into BUILD/proto/.
$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: proto/%.proto | deps
	@mkdir -p $(BUILD)
	protoc-c --c_out=$(BUILD) $<

$(BUILD)/proto/%.pb-c.o: $(BUILD)/proto/%.pb-c.c
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_OPT) -Wno-unused-parameter -c $< -o $@

$(BUILD)/dlm-client/corosync.o: $(BUILD)/proto/cfslock.pb-c.h
$(CFSD_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tools/cfs.o: \
	$(BUILD)/proto/control.pb-c.h

$(ODM_SRC:%.c=$(BUILD)/%.o) $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/*.c)): \
	$(BUILD)/proto/control.pb-c.h

# Every object after the generated headers (order-only): under make -j a tool that includes
# one through tools/ask.h was compiled before protoc-c had written it.
$(BUILD)/%.o: %.c release.h $(wildcard cvm/*.h tools/*.h dlm-client/*.h cfs/*.h cfsd/*.h odm/*.h) | deps \
	$(BUILD)/proto/control.pb-c.h $(BUILD)/proto/cfslock.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/lib/libcvm.a: $(CVM_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libcfs.a: $(CFS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libcfslock.a: $(LOCK_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libodm.so: $(ODM_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libodm.so -Wl,--version-script=odm/libodm.map $(LDFLAGS_SAN) \
		-o $@ $^ $(LDLIBS_ODM)

$(BUILD)/lib/libcvm.so: $(CVM_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libcvm.so.0 $(LDFLAGS_SAN) -o $@ $^ $(LDLIBS_CVM)

$(BUILD)/bin/%: $(BUILD)/tools/%.o $(TOOLS_COMMON_OBJ) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ $(LDLIBS_CVM) $(LDLIBS_LOCK) -lm

$(BUILD)/bin/mkfs.cfs: $(BUILD)/tools/mkfs_cfs.o $(TOOLS_COMMON_OBJ) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ $(LDLIBS_CVM) $(LDLIBS_LOCK)

$(BUILD)/bin/fsck.cfs: $(BUILD)/tools/fsck_cfs.o $(BUILD)/tools/fsck_mounted.o $(BUILD)/tools/ask.o $(BUILD)/proto/control.pb-c.o $(TOOLS_COMMON_OBJ) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ $(LDLIBS_CVM) $(LDLIBS_LOCK)

$(BUILD)/bin/cvm: $(BUILD)/tools/cvm.o $(BUILD)/tools/restripe_mounted.o $(BUILD)/tools/ask.o $(BUILD)/proto/control.pb-c.o $(TOOLS_COMMON_OBJ) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ $(LDLIBS_CVM) $(LDLIBS_LOCK)

$(BUILD)/bin/cfs: $(BUILD)/tools/cfs.o $(BUILD)/tools/cfs_quota.o $(BUILD)/tools/ask.o $(BUILD)/tools/utab.o $(BUILD)/proto/control.pb-c.o $(TOOLS_COMMON_OBJ) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ $(LDLIBS_CVM) $(LDLIBS_LOCK)

$(BUILD)/bin/odmstat: $(BUILD)/tools/odmstat.o $(BUILD)/tools/svgplot.o $(BUILD)/tools/ask.o $(BUILD)/odm/stats.o $(BUILD)/odm/rows.o $(BUILD)/proto/control.pb-c.o $(TOOLS_COMMON_OBJ) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ $(LDLIBS_CVM) $(LDLIBS_LOCK) -lm

# odmload loads libodm.so at run time, as a database does.
$(BUILD)/bin/odmload: $(BUILD)/tools/odmload.o $(BUILD)/tools/version.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ -ldl -lm

$(BUILD)/bin/cfsd: $(CFSD_SRC:%.c=$(BUILD)/%.o) $(BUILD)/odm/rows.o $(BUILD)/odm/stats.o $(BUILD)/proto/control.pb-c.o $(BUILD)/tools/utab.o $(TOOLS_COMMON_OBJ) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) $(LDFLAGS) -o $@ $^ -lfuse3 $(LDLIBS_CVM) $(LDLIBS_LOCK)

$(BUILD)/tests/odm/test_%: tests/odm/test_%.c $(BUILD)/odm/stats.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_SAN) -lcriterion -lpthread

# Driven by tests/odm/test_odm.sh on a mounted CFS: the real libodm.so, as a database loads it.
$(BUILD)/tests/odm/odm_api: tests/odm/odm_api.c $(BUILD)/lib/libodm.so $(BUILD)/odm/stats.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/odm/stats.o -L$(BUILD)/lib -lodm \
		-Wl,-rpath,$(abspath $(BUILD)/lib) $(LDFLAGS_SAN) -lcriterion -lpthread

# Driven by tests/odm/test_odm_crash.sh (writes through libodm until killed, then checks) and
# tests/cluster/test_cfs_odm.sh (ODM on several nodes).
$(BUILD)/tests/odm/odm_crash $(BUILD)/tests/odm/odm_race: $(BUILD)/tests/odm/%: tests/odm/%.c $(BUILD)/lib/libodm.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< -L$(BUILD)/lib -lodm -Wl,-rpath,$(abspath $(BUILD)/lib) $(LDFLAGS_SAN)

$(BUILD)/tests/%: tests/%.c tests/helpers.h $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIBS) $(LDFLAGS_SAN) -lcriterion $(LDLIBS_CVM) $(LDLIBS_LOCK)

# The test run: everything rebuilt with the sanitizers, then unit and integration tests.
check: check-build
	tests/run.sh build/asan

# The test run under pressure (not part of check): STRESS_MODES of tests/stress.sh (cpu: busy
# loops on every core; onecore: the tests on one core; slowdisk: their I/O throttled), each
# STRESS_ROUNDS times; TEST_SCRIPTS="GLOB..." narrows each run.  Stops at the first failure.
STRESS_MODES ?= cpu onecore slowdisk
STRESS_ROUNDS ?= 1
stress: check-build
	@for m in $(STRESS_MODES); do for r in $$(seq $(STRESS_ROUNDS)); do \
		echo "== stress: $$m, round $$r of $(STRESS_ROUNDS)"; \
		tests/stress.sh $$m build/asan || exit 1; done; done

# The seed's proof of concept at its full size (not part of check, which runs it with 5 nodes
# and 10 instances): 14 nodes, 60 instances of 10 libodm processes, one node dies.
poc: check-build
	POC_NODES=14 POC_INSTANCES=60 POC_PROCS=10 TEST_SCRIPTS=tests/cluster/test_cfs_odm_poc.sh \
		SCRIPT_LIMIT=3600 tests/run.sh build/asan

check-build: deps compat-builds
	$(MAKE) --no-print-directory SANITIZE=1 BUILD=build/asan build/asan/bin/cvm build/asan/bin/randio build/asan/bin/cfslock build/asan/bin/cfs-fence \
		$(CFS_TOOLS:$(BUILD)/%=build/asan/%) $(ODM_TOOLS:$(BUILD)/%=build/asan/%) \
		build/asan/lib/libodm.so build/asan/tests/odm/odm_api build/asan/tests/odm/odm_crash build/asan/tests/odm/odm_race \
		$(patsubst tests/%.c,build/asan/tests/%,$(wildcard tests/*/test_*.c))

# What the upgrade tests run beside this build (tests/upgrade/build.sh): the previous release,
# from git, and this tree speaking lock protocol major version 2.
compat-builds: deps
	tests/upgrade/build.sh previous build/asan/compat/previous
	tests/upgrade/build.sh major2 build/asan/compat/major2

demo: all
	scripts/tour.sh $(BUILD)

$(BUILD)/bench/lockbench: bench/locks/lockbench.c $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIBS) $(LDFLAGS_SAN) $(LDLIBS_LOCK)

# One after another (not as prerequisites, which make -j would run at once): each measures
# the machine alone.
bench:
	$(MAKE) bench-cvm
	$(MAKE) bench-locks
	$(MAKE) bench-cfs
	$(MAKE) bench-odm
	$(MAKE) bench-cluster

bench-cluster: all $(BUILD)/tests/odm/odm_crash $(BUILD)/tests/odm/odm_race # recovery.sh runs test_cfs_odm_failover.sh and test_cfs_stall.sh
	bench/cluster/run.sh $(BUILD)
	bench/cluster/recovery.sh $(BUILD)
	bench/cluster/walk.sh $(BUILD)
	bench/cluster/span.sh $(BUILD)
	bench/cluster/direct.sh $(BUILD)
	bench/cluster/quota.sh $(BUILD)
	bench/cluster/home.sh $(BUILD)
	bench/cluster/tree_read.sh $(BUILD)

# The shared software home's work on ext4, passthrough_ll, one node and a cluster, and a tree
# read by a node that did not write it (issue 69).
bench-home: all
	bench/cluster/home.sh $(BUILD)
	bench/cluster/tree_read.sh $(BUILD)

bench-cfs: all
	bench/cfs/run.sh $(BUILD)
	bench/cfs/fuse_path.sh $(BUILD)
	bench/cfs/fuse_trace.sh $(BUILD)
	bench/cfs/bigfile.sh $(BUILD)
	bench/cfs/quota.sh $(BUILD)

# The long runs of what make check runs short: the randomized soak of one filesystem (make
# check: 8 rounds; SOAK_SEED=N replays a run), the crash points, the damaged fields (make
# check: seeds 1 and 2, 40 cases each), node deaths and coherence checkers' operations.
soak: all
	SOAK_ROUNDS=$${SOAK_ROUNDS:-200} SOAK_STEPS=$${SOAK_STEPS:-2000} BIN=$(BUILD)/bin tests/cfs/test_soak.sh
	FUZZ_SEEDS="$${FUZZ_SEEDS:-$$(seq 3 62)}" FUZZ_CASES=$${FUZZ_CASES:-50} BIN=$(BUILD)/bin tests/cfs/test_fuzz.sh
	CRASH_POINTS=$${CRASH_POINTS:-200} SMALL_JOURNAL_POINTS=$${SMALL_JOURNAL_POINTS:-60} QUOTA_CRASH_POINTS=$${QUOTA_CRASH_POINTS:-60} BIN=$(BUILD)/bin tests/cfs/test_crash.sh
	RECOVERY_ROUNDS=$${RECOVERY_ROUNDS:-60} BIN=$(BUILD)/bin tests/cluster/test_cfs_recovery.sh
	RESTRIPE_KILL_ROUNDS=$${RESTRIPE_KILL_ROUNDS:-40} BIN=$(BUILD)/bin tests/cluster/test_cfs_restripe_kill.sh
	COHERENCE_OPS=$${COHERENCE_OPS:-3400} COHERENCE_REPLACE_OPS=$${COHERENCE_REPLACE_OPS:-1200} BIN=$(BUILD)/bin tests/cluster/test_cfs.sh

# xfstests' generic quick group on a one-node normal mount, a dboptimized mount and node 1 of
# a 3-node cluster, each result against tests/xfstests/expected (not part of check; hours).
# XFSTESTS_DIR names an xfstests tree already built (docs/testing.md says how to get one);
# XFSTESTS_KINDS, XFSTESTS_GROUP and XFSTESTS_TESTS narrow the run (tests/xfstests/run.sh).
xfstests: all
	tests/xfstests/run.sh $(BUILD)/bin

$(BUILD)/bench/odmbench: bench/odm/odmbench.c $(BUILD)/lib/libodm.so $(BUILD)/odm/stats.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/odm/stats.o -L$(BUILD)/lib -lodm \
		-Wl,-rpath,$(abspath $(BUILD)/lib) $(LDFLAGS_SAN) -lpthread

bench-odm: all $(BUILD)/bench/odmbench
	bench/odm/run.sh $(BUILD)
	bench/odm/cluster.sh $(BUILD)

bench-locks: all $(BUILD)/bench/lockbench
	bench/locks/run.sh $(BUILD)

bench-cvm: all
	bench/cvm/run.sh $(BUILD)
	bench/cvm/restripe.sh $(BUILD)

lint:
	scripts/check-spdx.sh
	scripts/check-copyright.py
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		-D_GNU_SOURCE -I. cvm dlm-client cfs cfsd odm tools
	clang-tidy --quiet $(CVM_SRC) $(LOCK_SRC) $(CFS_SRC) $(CFSD_SRC) $(ODM_SRC) tools/*.c -- $(CFLAGS_COMMON)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PREFIX)/include \
		$(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/lib/libcvm.a $(BUILD)/lib/libcfslock.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/lib/libcvm.so $(DESTDIR)$(LIBDIR)/libcvm.so.0
	ln -sf libcvm.so.0 $(DESTDIR)$(LIBDIR)/libcvm.so
	install -m 644 cvm/cvm.h dlm-client/cfslock.h odm/odm.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/lib/libodm.so $(DESTDIR)$(LIBDIR)/libodm.so
	install -d $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 644 man/libodm.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	install -m 644 man/cvm.8 man/cfslock.8 man/cfs.8 man/cfs-fence.8 man/mkfs.cfs.8 man/fsck.cfs.8 \
		$(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 644 man/randio.1 man/odmstat.1 man/odmload.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(SBINDIR)
	install -m 644 man/cfs.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	ln -sf $(PREFIX)/bin/cfs $(DESTDIR)$(SBINDIR)/mount.cfs
	ln -sf $(PREFIX)/bin/cfs $(DESTDIR)$(SBINDIR)/umount.cfs
	install -d $(DESTDIR)$(PREFIX)/sbin
	install -m 755 $(BUILD)/bin/cfs-fence $(DESTDIR)$(PREFIX)/sbin/
	install -d $(DESTDIR)$(SYSTEMDDIR)
	sed 's|@BINDIR@|$(PREFIX)/bin|; s|@SBINDIR@|$(PREFIX)/sbin|' scripts/systemd/cfs@.service \
		>$(DESTDIR)$(SYSTEMDDIR)/cfs@.service

# Debian packages of the tree as git knows it (committed, and changes to tracked files: what a
# clone would have), built with dpkg-buildpackage in build/deb/src; the .deb files land in
# DEB_DIR (build/deb).  See debian/.
DEB_DIR ?= build/deb
deb: deps
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src
	tree=$$(git stash create); git archive --format=tar $${tree:-HEAD} | tar -x -C $(DEB_DIR)/src
	id=$$(git describe --tags --always --dirty); cd $(DEB_DIR)/src && CFS_BUILD_ID=$$id \
		dpkg-buildpackage -b -us -uc -j2
	ls $(DEB_DIR)/*.deb

clean:
	rm -rf build
