/* Command-line parsing and the clean "bad input" exit shared by the kernels (see args.h). */
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank(void)
{
    int rank = 0, up = 0;
    MPI_Initialized(&up);
    if (up) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

void hpc_usage_error(const char *arg, const char *what, const char *allowed)
{
    if (world_rank() == 0) {
        fprintf(stderr, "ERROR: %s: %s; allowed: %s\n", arg, what, allowed);
        fflush(stderr);
    }
    int up = 0;
    MPI_Initialized(&up);
    if (up) MPI_Finalize();
    exit(HPC_EXIT_USAGE);
}

void hpc_agree_usage_error(int bad, const char *arg, const char *what, const char *allowed)
{
    int rank = world_rank();
    int mine = bad ? rank : INT_MAX, first = INT_MAX;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == INT_MAX) return;
    char msg[1024];
    if (first == 0) {
        if (rank == 0) snprintf(msg, sizeof msg, "%s", what);
    } else if (rank == first) {
        snprintf(msg, sizeof msg, "%s (on rank %d)", what, rank);
        MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 0, 999, MPI_COMM_WORLD);
    } else if (rank == 0) {
        MPI_Recv(msg, (int)sizeof msg, MPI_CHAR, first, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    hpc_usage_error(arg, rank == 0 ? msg : what, allowed);
}

const char *hpc_arg_value(int argc, char **argv, int *i, const char *allowed)
{
    if (*i + 1 >= argc) hpc_usage_error(argv[*i], "missing value", allowed);
    *i += 1;
    return argv[*i];
}

long long hpc_arg_ll(const char *arg, const char *text, long long lo, long long hi,
                     const char *allowed)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    char what[256];
    if (errno || end == text || *end != '\0') {
        snprintf(what, sizeof what, "'%s' is not an integer", text);
        hpc_usage_error(arg, what, allowed);
    }
    if (v < lo || v > hi) {
        snprintf(what, sizeof what, "%lld is out of range", v);
        hpc_usage_error(arg, what, allowed);
    }
    return v;
}

double hpc_arg_double(const char *arg, const char *text, double lo, double hi,
                      const char *allowed)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    char what[256];
    if (errno || end == text || *end != '\0' || !isfinite(v)) {
        snprintf(what, sizeof what, "'%s' is not a number", text);
        hpc_usage_error(arg, what, allowed);
    }
    if (v < lo || v > hi) {
        snprintf(what, sizeof what, "%g is out of range", v);
        hpc_usage_error(arg, what, allowed);
    }
    return v;
}

unsigned long long hpc_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024ULL;
}

int hpc_ranks_on_host(void)
{
    MPI_Comm node;
    int n = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    return n;
}
