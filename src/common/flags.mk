# Shared compiler settings for every kernel under src/. A kernel Makefile sets KERNEL and SRCS
# (its own .c files), includes this file, and gets: objects in build/obj/<kernel>/, the binary in
# build/bin/<kernel>, header dependencies (-MMD) and a rebuild when the flags change.
#
# Override on the command line: make -C src OPTFLAGS="-O2" or CFLAGS="..." or CC=...

HERE      := $(dir $(lastword $(MAKEFILE_LIST)))
TOP       := $(abspath $(HERE)/../..)
COMMON    := $(abspath $(HERE))
# BUILD_DIR: where bin/ and obj/ go; another MPI library's build goes to its own folder
# (scripts/mpi-libraries.sh: make -C src CC=<its mpicc> BUILD_DIR=build/<library>).
BUILD_DIR ?= $(TOP)/build
BINDIR    := $(BUILD_DIR)/bin
OBJDIR    := $(BUILD_DIR)/obj/$(KERNEL)

CC        ?= mpicc
ifeq ($(origin CC),default)
CC        := mpicc
endif
# -march=native: the binaries are built on the machine that runs them (course VM or cluster node).
OPTFLAGS  ?= -O3 -march=native
CFLAGS    ?= $(OPTFLAGS) -std=gnu11 -Wall -Wextra -fopenmp
LDLIBS    += -lm
VERSION   := 1.0

# The exact compile line is baked into the binary so every report shows how it was built.
BUILD_FLAGS := $(strip $(CC) $(CFLAGS) $(EXTRA_CFLAGS))
CPPFLAGS  += -I$(COMMON) -DHPCLAB_VERSION='"$(VERSION)"' -DHPCLAB_BUILD_FLAGS='"$(BUILD_FLAGS)"'

COMMON_SRCS := args.c json.c report.c placement.c
ALL_SRCS  := $(SRCS) $(COMMON_SRCS)
OBJS      := $(addprefix $(OBJDIR)/,$(ALL_SRCS:.c=.o))
FLAGSTAMP := $(OBJDIR)/flags.txt

vpath %.c . $(COMMON)

all: $(BINDIR)/$(KERNEL)

$(BINDIR)/$(KERNEL): $(OBJS) | $(BINDIR)
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) $(LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

$(OBJDIR)/%.o: %.c $(FLAGSTAMP) | $(OBJDIR)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(EXTRA_CFLAGS) -MMD -MP -c -o $@ $<

# Rewritten only when the flags differ, so an unchanged build stays a no-op.
$(FLAGSTAMP): FORCE | $(OBJDIR)
	@echo '$(BUILD_FLAGS) $(CPPFLAGS)' | cmp -s - $@ || echo '$(BUILD_FLAGS) $(CPPFLAGS)' > $@

$(OBJDIR) $(BINDIR):
	@mkdir -p $@

clean:
	rm -rf $(OBJDIR) $(BINDIR)/$(KERNEL)

.PHONY: all clean FORCE
-include $(OBJS:.o=.d)
