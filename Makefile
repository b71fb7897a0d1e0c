# SPDX-License-Identifier: MIT
# PyBox: build, tests, benchmarks. `make check` sets up everything it needs first
# (packages, engine, image) through scripts/setup.sh.

SANITIZE ?=
# A test build only: BROKEN=v2-reader compiles the watcher's cgroup v2 reader wrong on
# purpose (docs/cgroups.md), into a folder of its own; the v2 tests must fail with it.
# No other build has that code, and its receipts' pybox_version says so.
BROKEN ?=
ifneq ($(filter-out v2-reader,$(BROKEN)),)
$(error BROKEN=$(BROKEN): the only test build is BROKEN=v2-reader)
endif
BUILD ?= build$(if $(SANITIZE),-san)$(if $(BROKEN),-broken-$(BROKEN))
CC ?= gcc
# libcurl, libarchive, libcap, libsystemd and libmicrohttpd are not linked into PyBox:
# each is opened when first needed (pybox/dl.h: pybox/docker/engine.c,
# pybox/archive_api.c, pybox/native/caps.c, pybox/systemd.c, pybox/mcp/http.c), so a
# process that needs none does not load them and the libraries they bring. Tests that
# call them themselves link them.
PKGS := libcjson libcrypto libseccomp jansson
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) libcurl libarchive libcap libsystemd libmicrohttpd)
PKG_LIBS = $(shell pkg-config --libs $(PKGS)) -lm -ldl
CURL_LIBS = $(shell pkg-config --libs libcurl)
ARCHIVE_LIBS = $(shell pkg-config --libs libarchive)
CHECK_CFLAGS = $(shell pkg-config --cflags check)
CHECK_LIBS = $(shell pkg-config --libs check)

WARN := -Wall -Wextra -Werror -Wformat=2 -Wshadow -Wstrict-prototypes \
        -Wmissing-prototypes -Wvla -Wpointer-arith -Wimplicit-fallthrough -Wundef -Wwrite-strings
HARDEN := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE -fno-common
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) $(HARDEN) -MMD -MP $(PKG_CFLAGS) $(CFLAGS)
LDFLAGS_ALL = -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack $(LDFLAGS)
ifeq ($(BROKEN),v2-reader)
CFLAGS_ALL += -DPYBOX_TEST_BROKEN_V2_READER
endif
ifneq ($(SANITIZE),)
CFLAGS_ALL += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS_ALL += -fsanitize=$(SANITIZE)
endif

# The core library and its backends and images (every folder of pybox/ but the
# front-ends); the front-ends: the MCP server and the command line.
LIB_SRC := $(wildcard pybox/*.c) $(filter-out pybox/mcp/% pybox/cli/%,$(wildcard pybox/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/pybox/seccomp_blob.o $(BUILD)/obj/pybox/image/bootstrap_blob.o
FRONT_SRC := $(wildcard pybox/mcp/*.c) $(filter-out pybox/cli/main.c,$(wildcard pybox/cli/*.c))
FRONT_OBJ := $(FRONT_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC := $(wildcard unit/*.c)
UNIT_OBJ := $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)
ITEST_SRC := $(wildcard tests/*.c)
ITEST_OBJ := $(ITEST_SRC:%.c=$(BUILD)/obj/%.o)

.PHONY: all check unit integration setup mcp-clients bench demo format format-check source-check layers-check clean \
        campaign campaign-fast campaign-pages evidence-check schema site-check man-check completion-check \
        install uninstall install-check deb deb-test soak leak-check vm-check service-check deb-cache-check
all: $(BUILD)/pybox $(BUILD)/pybox-init $(BUILD)/pybox-test

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/obj/pybox/seccomp_blob.o: pybox/seccomp_blob.S pybox/seccomp.json
	@mkdir -p $(dir $@)
	$(CC) -c -DPYBOX_SECCOMP_FILE='"$(CURDIR)/pybox/seccomp.json"' $< -o $@

$(BUILD)/obj/pybox/image/bootstrap_blob.o: pybox/image/bootstrap_blob.S guest/bootstrap.py
	@mkdir -p $(dir $@)
	$(CC) -c -DPYBOX_BOOTSTRAP_FILE='"$(CURDIR)/guest/bootstrap.py"' $< -o $@

# The terminal escaper's code point tables (pybox/escape.c), generated from the Unicode
# Character Database that Debian's unicode-data package installs.
UCD_DIR ?= /usr/share/unicode
UCD_FILES := $(UCD_DIR)/UnicodeData.txt $(UCD_DIR)/DerivedCoreProperties.txt
$(UCD_FILES):
	@echo "$@ is missing: install the Debian package unicode-data (apt-get install unicode-data)" >&2; exit 1

$(BUILD)/gen/unicode_tables.h: scripts/gen-unicode.sh $(UCD_FILES)
	@mkdir -p $(dir $@)
	scripts/gen-unicode.sh $(UCD_DIR) >$@.tmp && mv $@.tmp $@

$(BUILD)/obj/pybox/escape.o: $(BUILD)/gen/unicode_tables.h
$(BUILD)/obj/pybox/escape.o: CFLAGS_ALL += -I$(BUILD)/gen
$(BUILD)/obj/unit/test_escape.o: CFLAGS_ALL += -DPYBOX_UCD_DIR='"$(UCD_DIR)"'
$(BUILD)/obj/unit/test_cli.o: CFLAGS_ALL += -DPYBOX_MAN_DIR='"$(CURDIR)/man"'

$(BUILD)/libpybox.a: $(LIB_OBJ)
	ar rcs $@ $^

$(BUILD)/pybox: $(BUILD)/obj/pybox/cli/main.o $(FRONT_OBJ) $(BUILD)/libpybox.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ $(PKG_LIBS) -lpthread -o $@

# The test build (pybox/hooks.h): the same program with the test hooks, which the
# installed pybox (the library's hooks.o) has none of. Its hooks-test.o comes before the
# library, so the library's hooks.o is never linked in beside it. Tests that need a hook
# run pybox-test (PYBOX_TEST_BIN); everything else runs and ships pybox.
HOOKS_TEST_OBJ := $(BUILD)/obj/pybox/hooks-test.o
$(HOOKS_TEST_OBJ): pybox/hooks.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DPYBOX_TEST_HOOKS -c $< -o $@
$(BUILD)/pybox-test: $(BUILD)/obj/pybox/cli/main.o $(FRONT_OBJ) $(HOOKS_TEST_OBJ) $(BUILD)/libpybox.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ $(PKG_LIBS) -lpthread -o $@

# The guest init is static and never sanitised: it runs as PID 1 inside the box.
GUEST_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Wshadow -static
$(BUILD)/pybox-init: guest/init.c guest/proto.h guest/main_blob.S guest/main.py
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -DPYBOX_GUEST_MAIN_FILE='"$(CURDIR)/guest/main.py"' guest/init.c guest/main_blob.S -o $@

$(BUILD)/unit-tests: $(UNIT_OBJ) $(BUILD)/obj/campaign/evidence.o $(BUILD)/obj/campaign/page.o $(BUILD)/obj/campaign/site.o \
                     $(FRONT_OBJ) $(HOOKS_TEST_OBJ) $(BUILD)/libpybox.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ $(CHECK_LIBS) $(PKG_LIBS) $(ARCHIVE_LIBS) -lpthread -o $@

$(BUILD)/obj/unit/%.o: unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -DPYBOX_FIXTURES='"$(CURDIR)/unit/fixtures"' -c $< -o $@

$(BUILD)/itest: $(ITEST_OBJ) $(HOOKS_TEST_OBJ) $(BUILD)/libpybox.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ $(CHECK_LIBS) $(PKG_LIBS) $(CURL_LIBS) $(ARCHIVE_LIBS) -lpthread -o $@

$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -DPYBOX_SOURCE='"$(CURDIR)"' -c $< -o $@

CAMPAIGN_OBJ := $(BUILD)/obj/campaign/campaign.o $(BUILD)/obj/campaign/evidence.o $(BUILD)/obj/campaign/page.o \
    $(BUILD)/obj/campaign/site.o $(BUILD)/obj/campaign/inspect.o
$(BUILD)/pybox-campaign: $(CAMPAIGN_OBJ) $(BUILD)/libpybox.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ $(PKG_LIBS) -lpthread -o $@

# The native sandbox's try and measuring tool (docs/native.md).
$(BUILD)/native-try: $(BUILD)/obj/tests/tools/native_try.o $(BUILD)/libpybox.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ $(PKG_LIBS) -lpthread -o $@

$(BUILD)/pybox-bench: campaign/bench.c $(BUILD)/libpybox.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ $(PKG_LIBS) -lpthread -o $@

# The backends set-up prepares for the tests, the campaign and the benchmark; the demo
# needs only the default one.
BACKENDS ?= docker native
setup:
	scripts/setup.sh $(BACKENDS)

# The MCP clients the integration tests drive pybox mcp with (Node.js, npm ci).
mcp-clients:
	scripts/setup-mcp-clients.sh

unit: $(BUILD)/unit-tests
	$(BUILD)/unit-tests

# The same suites on each backend (tests/main.c): docker, then native. They run the
# installed build, pybox, and the test build, pybox-test, only where a test hook is needed.
# The receipts are checked against their published schema by Debian's python3-jsonschema;
# the MCP suite puts nginx with TLS (a certificate made with openssl) in front of
# pybox mcp --listen.
INTEGRATION_PACKAGES := python3-jsonschema nginx-light openssl
ITEST_BINS = PYBOX_BIN=$(CURDIR)/$(BUILD)/pybox PYBOX_TEST_BIN=$(CURDIR)/$(BUILD)/pybox-test
integration: $(BUILD)/itest $(BUILD)/pybox $(BUILD)/pybox-test $(BUILD)/pybox-campaign
	scripts/need-packages.sh integration $(INTEGRATION_PACKAGES)
	PYBOX_BACKEND=docker $(ITEST_BINS) $(BUILD)/itest
	PYBOX_BACKEND=native $(ITEST_BINS) $(BUILD)/itest

# Everything, from nothing: packages, engine, images, MCP clients, then unit and
# integration tests, and the evidence site in headless Chromium.
check: setup mcp-clients
	$(MAKE) unit integration site-check service-check deb-cache-check

# The image builds' package cache both ways (tests/deb-cache.sh): an altered package in
# it refused and removed, and taken when only that check is removed.
deb-cache-check:
	tests/deb-cache.sh

bench: setup $(BUILD)/pybox-bench
	scripts/bench.sh $(BUILD)/pybox

demo:
	scripts/demo.sh $(BUILD)/pybox

# The evidence campaign (docs/campaign.md): every case in campaign/cases, records and
# pages into evidence/. campaign-fast: the cases marked fast, into a scratch folder
# (CAMPAIGN_OUT), checked; evidence-check: the committed evidence.
CAMPAIGN_CASES := $(sort $(wildcard campaign/cases/*.json))
CAMPAIGN_OUT ?= $(BUILD)/evidence-fast
CAMPAIGN_TOOLS := $(BUILD)/pybox-campaign $(BUILD)/pybox $(BUILD)/pybox-test $(BUILD)/pybox-init $(BUILD)/pybox-bench
# Then the cases whose verdicts must hold on a Debian host as shipped (cgroup v2 under
# systemd), run in the guest of make vm-check, their records in the same evidence with
# their host: columns of their own on the pages.
campaign: setup mcp-clients
	$(MAKE) $(CAMPAIGN_TOOLS)
	$(BUILD)/pybox-campaign run --pybox $(CURDIR)/$(BUILD)/pybox --out evidence --limits campaign/limits.md \
	    $(CAMPAIGN_CASES)
	scripts/need-packages.sh campaign $(VM_PACKAGES)
	$(MAKE) all $(BUILD)/itest $(BUILD)/pybox-campaign deb
	PYBOX_VM_STEPS=campaign PYBOX_VM_CAMPAIGN_OUT=$(CURDIR)/evidence scripts/vm-check.sh $(BUILD)
	$(BUILD)/pybox-campaign check evidence campaign/limits.md

campaign-fast: setup mcp-clients
	$(MAKE) $(CAMPAIGN_TOOLS)
	rm -rf $(CAMPAIGN_OUT)
	$(BUILD)/pybox-campaign run --fast --pybox $(CURDIR)/$(BUILD)/pybox --out $(CAMPAIGN_OUT) \
	    --limits campaign/limits.md $(CAMPAIGN_CASES)
	$(BUILD)/pybox-campaign check $(CAMPAIGN_OUT) campaign/limits.md

# The soak (docs/campaign.md, case campaign/cases/reliability-soak.json) through the
# campaign, into a scratch folder (SOAK_OUT), checked: SOAK_RUNS mixed pybox exec runs and
# SOAK_MCP calls to pybox mcp, on the backend PYBOX_BACKEND names (docker by default).
SOAK_RUNS ?= 500
SOAK_MCP ?= 300
SOAK_OUT ?= $(BUILD)/soak
soak: mcp-clients
	$(MAKE) $(CAMPAIGN_TOOLS)
	rm -rf $(SOAK_OUT)
	SOAK_RUNS=$(SOAK_RUNS) SOAK_MCP=$(SOAK_MCP) $(BUILD)/pybox-campaign run --pybox $(CURDIR)/$(BUILD)/pybox \
	    --out $(SOAK_OUT) --limits campaign/limits.md campaign/cases/reliability-soak.json
	$(BUILD)/pybox-campaign check $(SOAK_OUT) campaign/limits.md

# The MCP server built with AddressSanitizer, under LeakSanitizer through 100 calls of the
# official SDK client (tests/mcp/leak-check.mjs), on each backend of LEAK_BACKENDS and each
# transport of LEAK_TRANSPORTS (stdio, and HTTP: pybox mcp --listen): it must exit 0
# without a report. Each summary goes to build-san/leak-check-BACKEND-TRANSPORT.json.
LEAK_BACKENDS ?= docker native
LEAK_TRANSPORTS ?= stdio http
leak-check: mcp-clients $(BUILD)/pybox-campaign
	$(MAKE) SANITIZE=address,undefined build-san/pybox build-san/pybox-init
	for b in $(LEAK_BACKENDS); do for t in $(LEAK_TRANSPORTS); do \
	    PYBOX_BACKEND=$$b LEAK_TRANSPORT=$$t PYBOX_BIN=$(CURDIR)/build-san/pybox \
	        PYBOX_CAMPAIGN_BIN=$(CURDIR)/$(BUILD)/pybox-campaign node tests/mcp/leak-check.mjs \
	        >build-san/leak-check-$$b-$$t.json || exit 1; \
	done; done

campaign-pages: $(BUILD)/pybox-campaign
	$(BUILD)/pybox-campaign pages evidence campaign/limits.md

evidence-check: $(BUILD)/pybox-campaign
	$(BUILD)/pybox-campaign check evidence campaign/limits.md

# The published JSON Schema of receipts, made from their one definition
# (pybox/receipt_schema.c); a unit test fails when the committed file differs.
schema: $(BUILD)/pybox
	$(BUILD)/pybox receipt-schema >docs/receipt.schema.json.tmp && mv docs/receipt.schema.json.tmp docs/receipt.schema.json

# The site of the committed records, rendered into $(BUILD)/site-check and opened in
# headless Chromium: console errors, broken links, the charts, a walkthrough screenshot.
site-check: $(BUILD)/pybox-campaign $(BUILD)/pybox
	scripts/site-check.sh $(BUILD)

FORMAT_FILES := $(wildcard pybox/*.c pybox/*.h pybox/*/*.c pybox/*/*.h guest/*.c guest/*.h unit/*.c unit/*.h tests/*.c tests/*.h tests/*/*.c campaign/*.c campaign/*.h fuzz/*.c fuzz/*.h)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run -Werror $(FORMAT_FILES)
# The rules the compiler does not enforce (banned calls, unchecked paths, a library that
# prints): scripts/check-source.sh.
source-check:
	scripts/check-source.sh
# The layering (docs/box-interface.md, "Layers"): no include from a lower folder to a
# higher one, no include circle between modules (scripts/check-layers.sh).
layers-check:
	scripts/check-layers.sh

# The service of pybox mcp --listen (systemd/pybox-mcp.service) as make install writes it,
# for this build's pybox, checked by systemd-analyze verify: any warning fails (this
# machine's systemd need not be running). docs/mcp.md, "As a service".
service-check: $(BUILD)/pybox
	scripts/need-packages.sh service-check systemd
	sed 's|@bindir@|$(CURDIR)/$(BUILD)|g' systemd/pybox-mcp.service >$(BUILD)/pybox-mcp.service
	out=$$(systemd-analyze verify --man=no $(BUILD)/pybox-mcp.service 2>&1); \
	    [ -z "$$out" ] || { echo "$$out" >&2; exit 1; }

# The man pages (man/, mdoc): mandoc's lint, where a warning or an error fails, and each
# page rendered by man -l without a warning. That they say what the code does (every
# option, default, ceiling, status word and exit code) is a unit test (unit/test_cli.c).
MAN_PAGES := man/pybox.1 man/pybox-exec.1 man/pybox-mcp.1 man/pybox-receipt.5
man-check:
	scripts/need-packages.sh man-check mandoc man-db
	mandoc -Tlint -W warning $(MAN_PAGES)
	for p in $(MAN_PAGES); do \
	    w=$$(MANWIDTH=80 man --warnings -l $$p 2>&1 >/dev/null); \
	    [ -z "$$w" ] || { echo "$$p: $$w" >&2; exit 1; }; \
	done

# Install under PREFIX (DESTDIR in front, for packaging): bin/pybox,
# libexec/pybox/pybox-init, share/pybox/images, the man pages and the bash completion,
# listed in share/pybox/installed-files; uninstall removes exactly those
# (scripts/install.sh). The installed pybox finds its files from where it is.
PREFIX ?= /usr/local
DESTDIR ?=
install: $(BUILD)/pybox $(BUILD)/pybox-init
	scripts/install.sh install $(BUILD) "$(DESTDIR)" "$(PREFIX)"
uninstall:
	scripts/install.sh uninstall "$(DESTDIR)" "$(PREFIX)"
# make install into a folder of its own from a build folder of its own, both moved or
# deleted after, then the installed pybox runs, builds an image from its own recipes
# into a private installation, and make uninstall removes what was installed, nothing
# else (tests/install.sh; needs this machine's installation and its stdlib image).
install-check:
	tests/install.sh

# The Debian package, $(BUILD)/pybox_VERSION_ARCH.deb, built with debhelper from a copy
# of the tree (scripts/deb.sh); deb-test installs it with apt into a clean Debian root
# made by mmdebstrap from this machine's apt sources, and runs it there (tests/deb.sh;
# slow, and it downloads packages: not part of make check; CI runs it).
deb:
	scripts/deb.sh $(BUILD)
deb-test: deb
	tests/deb.sh $(BUILD)

# PyBox on a Debian host as shipped (systemd, cgroup v2), in a guest booted with qemu
# (scripts/vm.sh; KVM when it works here, software emulation otherwise): the package
# installed there with apt, the integration suites, the campaign's restriction and crash
# cases and the MCP SDK client on both backends, a watcher whose v2 reader lies caught,
# and rootless boxes as an ordinary user (scripts/vm-check.sh, tests/vm-guest.sh).
VM_PACKAGES := qemu-system-x86 qemu-utils e2fsprogs
vm-check: setup mcp-clients
	scripts/need-packages.sh vm-check $(VM_PACKAGES)
	$(MAKE) all $(BUILD)/itest $(BUILD)/pybox-campaign deb
	$(MAKE) BROKEN=v2-reader BUILD=build-broken-v2-reader build-broken-v2-reader/pybox \
	    build-broken-v2-reader/pybox-test build-broken-v2-reader/itest
	scripts/vm-check.sh $(BUILD)

# The bash completion (completion/pybox.bash) against the built pybox, in a private
# installation of its own.
completion-check: $(BUILD)/pybox
	tests/completion.sh $(BUILD)/pybox

# Fuzzing (docs/fuzzing.md): one libFuzzer target per parser of outside bytes, fuzz/<t>.c,
# built with clang, AddressSanitizer and UBSan in build-fuzz/ from the same sources.
# `make fuzz` runs each FUZZ_SECONDS seconds on its corpus (fuzz/corpus/<t>/) and
# dictionary (fuzz/dict/<t>.dict); new inputs go to build-fuzz/corpus/<t>/, findings to
# fuzz/findings/<t>/, and any finding fails it.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang-14
FUZZ_BUILD := build-fuzz
FUZZ_TARGETS := $(sort $(filter-out common,$(basename $(notdir $(wildcard fuzz/*.c)))))
FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE -O1 -g $(WARN) -Wno-format-nonliteral -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=all -MMD -MP $(PKG_CFLAGS)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o) $(FUZZ_BUILD)/obj/pybox/seccomp_blob.o \
    $(FUZZ_BUILD)/obj/pybox/image/bootstrap_blob.o
FUZZ_FRONT_OBJ := $(FRONT_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz-%)
# clang and its fuzzing runtime, installed for the fuzz targets only (not every set-up).
FUZZ_PACKAGES := clang-14 libclang-rt-14-dev
.PHONY: fuzz-tools
fuzz-tools:
	scripts/need-packages.sh fuzz $(FUZZ_PACKAGES)

$(FUZZ_BUILD)/obj/%.o: %.c | fuzz-tools
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_BUILD)/obj/fuzz/%.o: fuzz/%.c | fuzz-tools
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -I$(BUILD)/gen -DPYBOX_FUZZ_DIR='"$(CURDIR)/fuzz"' \
	    -DPYBOX_FIXTURES='"$(CURDIR)/unit/fixtures"' -c $< -o $@
$(FUZZ_BUILD)/obj/pybox/seccomp_blob.o: pybox/seccomp_blob.S pybox/seccomp.json | fuzz-tools
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -c -DPYBOX_SECCOMP_FILE='"$(CURDIR)/pybox/seccomp.json"' $< -o $@
$(FUZZ_BUILD)/obj/pybox/image/bootstrap_blob.o: pybox/image/bootstrap_blob.S guest/bootstrap.py | fuzz-tools
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -c -DPYBOX_BOOTSTRAP_FILE='"$(CURDIR)/guest/bootstrap.py"' $< -o $@
$(FUZZ_BUILD)/obj/pybox/escape.o: $(BUILD)/gen/unicode_tables.h
$(FUZZ_BUILD)/obj/pybox/escape.o: FUZZ_FLAGS += -I$(BUILD)/gen
$(FUZZ_BUILD)/obj/fuzz/escape.o: $(BUILD)/gen/unicode_tables.h
$(FUZZ_BUILD)/libpybox.a: $(FUZZ_LIB_OBJ)
	ar rcs $@ $^
$(FUZZ_BUILD)/fuzz-%: $(FUZZ_BUILD)/obj/fuzz/%.o $(FUZZ_BUILD)/obj/fuzz/common.o $(FUZZ_FRONT_OBJ) $(FUZZ_BUILD)/libpybox.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ $(PKG_LIBS) $(ARCHIVE_LIBS) -lpthread -o $@

.SECONDARY: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/obj/fuzz/%.o) $(FUZZ_BUILD)/obj/fuzz/common.o
.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf build build-san build-fuzz

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_FRONT_OBJ:.o=.d) $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/obj/fuzz/%.d)
-include $(LIB_OBJ:.o=.d) $(FRONT_OBJ:.o=.d) $(UNIT_OBJ:.o=.d) $(ITEST_OBJ:.o=.d) $(CAMPAIGN_OBJ:.o=.d) \
    $(BUILD)/obj/pybox/cli/main.d $(HOOKS_TEST_OBJ:.o=.d)
