/* bench_events.c - the tight loop bench/tracer.py uses to price one traced MPI event.
 *
 * Each rank, alone on MPI_COMM_SELF, posts Irecv + Isend of 0 bytes to itself and waits with
 * Waitall: 3 traced events per iteration, no network, so the difference between a traced and
 * an untraced run divided by the events is the tracer's cost per event. A second loop times
 * user regions (mpitrace_begin/end, 2 events per iteration) when the tracer is loaded.
 * Output: one `key = value` line per result on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef ITERATIONS
#define ITERATIONS 200000 /* long enough that the loop takes well over the timer resolution */
#endif

/* Weak: these are non-NULL only when libmpitrace.so is preloaded. */
void mpitrace_begin(const char *name) __attribute__((weak));
void mpitrace_end(const char *name) __attribute__((weak));

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : ITERATIONS;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (n < 1) {
        if (rank == 0)
            fprintf(stderr, "ERROR: iterations: must be a positive integer; allowed: >= 1\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Request req[2];
    char sbuf = 0, rbuf;
    /* Warm-up iteration, untimed. */
    MPI_Irecv(&rbuf, 0, MPI_CHAR, 0, 0, MPI_COMM_SELF, &req[0]);
    MPI_Isend(&sbuf, 0, MPI_CHAR, 0, 0, MPI_COMM_SELF, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    double t0 = seconds();
    for (long i = 0; i < n; i++) {
        MPI_Irecv(&rbuf, 0, MPI_CHAR, 0, 0, MPI_COMM_SELF, &req[0]);
        MPI_Isend(&sbuf, 0, MPI_CHAR, 0, 0, MPI_COMM_SELF, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    double t_mpi = seconds() - t0;
    double t_region = -1.0;
    if (mpitrace_begin && mpitrace_end) {
        t0 = seconds();
        for (long i = 0; i < n; i++) {
            mpitrace_begin("loop");
            mpitrace_end("loop");
        }
        t_region = seconds() - t0;
    }
    if (rank == 0) {
        printf("iterations        = %ld\n", n);
        printf("events_per_iter   = 3\n");
        printf("mpi_loop_seconds  = %.9f\n", t_mpi);
        printf("traced            = %d\n", mpitrace_begin != NULL);
        if (t_region >= 0)
            printf("region_loop_seconds = %.9f\n", t_region);
    }
    MPI_Finalize();
    return 0;
}
