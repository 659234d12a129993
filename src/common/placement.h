/* Where each rank and OpenMP thread ran: host, the CPU it was on (sched_getcpu) and the CPUs it
   was allowed on (sched_getaffinity), gathered to rank 0. This is the evidence for binding
   lessons, e.g. two ranks whose threads all share the same allowed CPUs. */
#ifndef HPCLAB_PLACEMENT_H
#define HPCLAB_PLACEMENT_H
#include <stddef.h>

#define HPC_MAX_CPUS 1024

typedef struct {
    int rank;
    int thread; /* -1: the rank's main thread outside any parallel region */
    int cpu;
    char host[64];
    unsigned long long mask[HPC_MAX_CPUS / 64];
} hpc_where;

typedef struct {
    int n;        /* entries (rank 0 only; 0 elsewhere) */
    hpc_where *w; /* sorted by rank, then thread */
} hpc_placement;

/* Collective over MPI_COMM_WORLD. with_threads: also record every thread of an OpenMP parallel
   region (same team size as the kernel's). */
void hpc_placement_collect(hpc_placement *p, int with_threads);
void hpc_placement_free(hpc_placement *p);

/* "0-3,8" from a mask; writes at most n bytes. */
void hpc_cpulist(const unsigned long long *mask, char *out, size_t n);

#endif
