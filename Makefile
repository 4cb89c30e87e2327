# ringshard: PGXS build.  The pure core (src/core) is also built on its own by
# test/unit/Makefile, without PostgreSQL.

EXTENSION = ringshard
MODULE_big = ringshard
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" ringshard.control)

CORE_OBJS = \
	src/core/rs_status.o \
	src/core/rs_hash.o \
	src/core/rs_token_text.o \
	src/core/rs_keybytes.o \
	src/core/rs_ring.o \
	src/core/rs_ring_diff.o \
	src/core/rs_ring_alloc.o \
	src/core/rs_schemes.o \
	src/core/rs_partmap.o \
	src/core/rs_config.o \
	src/core/rs_topk.o

GLUE_OBJS = \
	src/ringshard.o \
	src/guc.o \
	src/admin/version.o \
	src/admin/admin_errors.o \
	src/types/ringtoken.o \
	src/types/key_bytes.o \
	src/routing/topology_cache.o \
	src/routing/routing.o \
	src/routing/ring_info.o \
	src/routing/ring_tokens.o \
	src/routing/partitions.o \
	src/routing/annotated_tables.o \
	src/routing/previews.o \
	src/routing/placement.o \
	src/routing/hot_keys.o \
	src/remote/catalog.o \
	src/remote/connection.o \
	src/remote/transaction.o \
	src/remote/queue.o \
	src/remote/values.o \
	src/remote/stats.o \
	src/fdw/handler.o \
	src/fdw/deparse.o \
	src/fdw/plan_state.o \
	src/fdw/planner.o \
	src/fdw/statement_planner.o \
	src/fdw/router.o \
	src/fdw/fanout_aggregate.o \
	src/fdw/scan.o \
	src/fdw/upper.o \
	src/fdw/upper_scan.o \
	src/fdw/modify.o \
	src/fdw/write_locks.o \
	src/fdw/node_analysis.o \
	src/commands/ddl.o \
	src/commands/ddl_hook.o \
	src/worker/guard.o \
	src/worker/ranges.o \
	src/admin/node_commands.o \
	src/admin/addresses.o \
	src/admin/checks.o \
	src/admin/verify.o \
	src/operations/move_rows.o \
	src/operations/progress.o \
	src/compat/plproxy_bridge.o \
	src/bgworker/watchdog.o \
	src/compat/legacy_1_0.o

OBJS = $(CORE_OBJS) $(GLUE_OBJS)

# The install script is assembled from one file per concern, in name order.
EXTENSION_PIECES = $(sort $(wildcard extension/*.sql))
DATA_built = $(EXTENSION)--$(EXTVERSION).sql $(EXTENSION)--1.1--1.2.sql
# Install and update scripts of earlier versions, as they were released (the
# upgrade tests install 1.0 and 1.1 first).
DATA = $(EXTENSION)--1.0.sql $(EXTENSION)--1.1.sql $(EXTENSION)--1.0--1.1.sql
# the Prometheus exporter's queries file (docs/monitoring.md), into $(docdir)/extension
DOCS = monitoring/postgres_exporter-queries.yaml
# The update from 1.1: hand-written steps, and every definition of 1.2 taken
# from the install script's pieces (scripts/upgrade-script).
UPGRADE_PIECES = $(sort $(wildcard extension/upgrade/1.1--1.2/*.sql))

PG_CPPFLAGS = -I$(srcdir)/src -I$(srcdir)/src/core -I$(libpq_srcdir) -DRINGSHARD_VERSION='"$(EXTVERSION)"'
# Only what PostgreSQL loads by name is exported (src/exports.map); the rest
# of the library, whatever its names, is not visible to other libraries.
SHLIB_LINK = -lyaml -lcrypto $(libpq) -Wl,--version-script=$(srcdir)/src/exports.map
PG_CFLAGS = -Wall -Wmissing-prototypes -Werror=implicit-function-declaration

# Tests only: `make FAULT_INJECTION=1` compiles in the setting
# ringshard.fault_injection, crash and sleep points in the commit protocol
# (test/t/010_two_phase.pl); test/run-all builds that way.  A plain build has
# no such setting.
ifneq ($(FAULT_INJECTION),)
PG_CPPFLAGS += -DRINGSHARD_FAULT_INJECTION
endif

REGRESS = ringtoken token_vectors bad_input ring_murmur3 ring_ketama ring_zones ring_tokens ring_admin ring_info \
	partitions partition_config annotated_tables privileges definer_hijack \
	previews keys pushdown upserts router reference version
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION) --encoding=UTF8

TAP_TESTS = 1
EXTRA_CLEAN = src/remote/.fault_injection
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(EXTENSION)--$(EXTVERSION).sql: $(EXTENSION_PIECES) ringshard.control
	cat $(EXTENSION_PIECES) > $@

$(EXTENSION)--1.1--1.2.sql: $(UPGRADE_PIECES) $(EXTENSION_PIECES) ringshard.control scripts/upgrade-script
	$(if $(PERL),$(PERL),perl) scripts/upgrade-script 1.1 1.2 > $@.tmp && mv $@.tmp $@

.PHONY: unit
unit:
	$(MAKE) -C test/unit run

$(shlib): src/exports.map

# PGXS tracks no header dependencies for extensions: rebuild on any change.
$(OBJS): $(wildcard src/*.h src/*/*.h)
# The library's version comes from the control file.
src/admin/version.o: ringshard.control
# The commit protocol and its setting are compiled again when FAULT_INJECTION changes: a stamp
# file holds the setting of the last build and is rewritten only when it
# changes.
FAULT_STAMP = src/remote/.fault_injection
src/remote/transaction.o src/guc.o: $(FAULT_STAMP)
$(FAULT_STAMP): fault-injection-setting
	@echo '$(if $(FAULT_INJECTION),on,off)' | cmp -s - $@ || echo '$(if $(FAULT_INJECTION),on,off)' > $@
.PHONY: fault-injection-setting
