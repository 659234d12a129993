/* Placement report: record and gather where ranks and threads ran (see placement.h). */
#define _GNU_SOURCE
#include "placement.h"

#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void record(hpc_where *w, int rank, int thread, const char *host)
{
    memset(w, 0, sizeof *w);
    w->rank = rank;
    w->thread = thread;
    w->cpu = sched_getcpu();
    snprintf(w->host, sizeof w->host, "%s", host);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < HPC_MAX_CPUS && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) w->mask[c / 64] |= 1ULL << (c % 64);
    }
}

void hpc_placement_collect(hpc_placement *p, int with_threads)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[64] = "unknown";
    gethostname(host, sizeof host - 1);

    int nthreads = with_threads ? omp_get_max_threads() : 0;
    int mine = 1 + nthreads;
    hpc_where *local = calloc((size_t)mine, sizeof *local);
    record(&local[0], rank, -1, host);
    if (with_threads) {
#pragma omp parallel num_threads(nthreads)
        {
            int t = omp_get_thread_num();
            if (t < nthreads) record(&local[1 + t], rank, t, host);
        }
    }

    int *counts = NULL, *displs = NULL;
    if (rank == 0) {
        counts = calloc((size_t)size, sizeof *counts);
        displs = calloc((size_t)size, sizeof *displs);
    }
    int bytes = mine * (int)sizeof(hpc_where);
    MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    if (rank == 0)
        for (int r = 0; r < size; r++) {
            displs[r] = total;
            total += counts[r];
        }
    p->n = rank == 0 ? total / (int)sizeof(hpc_where) : 0;
    p->w = rank == 0 ? malloc((size_t)total) : NULL;
    MPI_Gatherv(local, bytes, MPI_BYTE, p->w, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(local);
    free(counts);
    free(displs);
}

void hpc_placement_free(hpc_placement *p)
{
    free(p->w);
    p->w = NULL;
    p->n = 0;
}

void hpc_cpulist(const unsigned long long *mask, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int c = 0; c < HPC_MAX_CPUS; c++) {
        if (!(mask[c / 64] >> (c % 64) & 1ULL)) continue;
        int e = c;
        while (e + 1 < HPC_MAX_CPUS && (mask[(e + 1) / 64] >> ((e + 1) % 64) & 1ULL)) e++;
        int k = e > c ? snprintf(out + used, n - used, "%s%d-%d", used ? "," : "", c, e)
                      : snprintf(out + used, n - used, "%s%d", used ? "," : "", c);
        if (k < 0 || (size_t)k >= n - used) break;
        used += (size_t)k;
        c = e;
    }
}
