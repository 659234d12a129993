/* stream: STREAM-like memory bandwidth (Copy, Scale, Add, Triad over three double arrays),
   OpenMP-parallel, optionally one copy per MPI rank running at the same time (hybrid mode).
   Follows STREAM's method (untimed first repetition, best rate from the minimum time, results
   checked against independently recomputed values) but is not a compliant STREAM result.

   Two kernels beyond STREAM's four, whose memory traffic needs no assumption: Update
   (c[j] = s * c[j], in place: every line is read before it is written, so no write-allocate)
   and Sum (a read-only reduction over b). STREAM's rates count the bytes the source code names
   (Copy 16, Scale 16, Add 24, Triad 24 B per element); with ordinary stores the core also reads
   each stored line before writing it (write-allocate: +8 B per element), so the bytes really
   moved are 24, 24, 32, 32. The report gives both counts per kernel. */
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "json.h"
#include "report.h"
#include "timer.h"

/* Elements per array per rank. Size each array to at least 4x the last-level cache so the
   arrays stream from memory (32 MiB L3 -> 16M doubles); 20M doubles = 160 MB per array. */
#ifndef STREAM_ARRAY_SIZE
#define STREAM_ARRAY_SIZE 20000000LL
#endif
/* Repetitions including the untimed first one; STREAM uses 10. */
#ifndef NTIMES
#define NTIMES 10
#endif

enum { COPY, SCALE, ADD, TRIAD, UPDATE, SUM, NK };
static const char *NAMES[NK] = {"Copy", "Scale", "Add", "Triad", "Update", "Sum"};
/* Arrays read + written per element, as the source names them (STREAM's count; the rates use it). */
static const int ARRAYS_MOVED[NK] = {2, 2, 3, 3, 2, 1};
/* Extra arrays read per element by write-allocate: a store to a line not in cache reads the line
   first (ordinary stores; this build emits no non-temporal ones). Update reads c before writing
   it, Sum writes nothing. */
static const int WRITE_ALLOCATE[NK] = {1, 1, 1, 1, 0, 0};

static const char *ALLOWED = "--size N (elements per array per rank, 1..68719476736), "
                             "--reps R (2..200), --json FILE, --help";

typedef struct {
    long long n;
    long long reps;
    const char *json;
} options;

static options parse(int argc, char **argv, int rank)
{
    options o = {STREAM_ARRAY_SIZE, NTIMES, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--size"))
            o.n = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 1LL << 36, "1..68719476736");
        else if (!strcmp(a, "--reps"))
            /* The arrays grow 15-fold per repetition (STREAM's recurrence with scalar 3): past
             * about 260 repetitions they overflow a double and validation sees NaN. */
            o.reps = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 2, 200, "2..200");
        else if (!strcmp(a, "--json"))
            o.json = hpc_arg_value(argc, argv, &i, ALLOWED);
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0)
                printf("usage: stream [--size N] [--reps R] [--json FILE]\n"
                       "  STREAM-like Copy/Scale/Add/Triad, plus Update (c = s*c, in place) and Sum\n"
                       "  (read-only); every MPI rank runs its own arrays at once.\n"
                       "  --size N     doubles per array per rank (default %lld)\n"
                       "  --reps R     repetitions, the first one untimed (default %d)\n"
                       "  --json FILE  also write the report as JSON (FILE must not exist)\n"
                       "  threads: OMP_NUM_THREADS; binding: OMP_PROC_BIND / OMP_PLACES, mpirun --bind-to\n",
                       (long long)STREAM_ARRAY_SIZE, NTIMES);
            MPI_Finalize();
            exit(0);
        } else
            hpc_usage_error(a, "unknown argument", ALLOWED);
    }
    return o;
}

/* Average absolute error of x against the expected value, relative to it (STREAM's check). */
static double rel_error(const double *x, long long n, double expect)
{
    double sum = 0.0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (long long j = 0; j < n; j++) sum += fabs(x[j] - expect);
    return fabs(sum / (double)n / expect);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o = parse(argc, argv, rank);
    if (o.json) hpc_check_json_path(o.json);

    const long long n = o.n;
    const double bytes_array = (double)n * sizeof(double);
    {
        unsigned long long avail = hpc_mem_available();
        int here = hpc_ranks_on_host();
        double need = 3.0 * bytes_array * here;
        char what[256];
        long long fit = avail ? (long long)(0.9 * (double)avail / (3.0 * sizeof(double) * here)) : 0;
        snprintf(what, sizeof what,
                 "3 arrays x %lld doubles x %d ranks on this host need %.0f MB, %.0f MB available",
                 n, here, need / 1e6, (double)avail / 1e6);
        char allowed[96];
        snprintf(allowed, sizeof allowed, "1..%lld for %d ranks per host", fit, here);
        hpc_agree_usage_error(avail && need > 0.9 * (double)avail, "--size", what, allowed);
    }

    double *a = NULL, *b = NULL, *c = NULL;
    int alloc_bad = posix_memalign((void **)&a, 4096, (size_t)n * sizeof(double)) ||
                    posix_memalign((void **)&b, 4096, (size_t)n * sizeof(double)) ||
                    posix_memalign((void **)&c, 4096, (size_t)n * sizeof(double));
    hpc_agree_usage_error(alloc_bad, "--size", "could not allocate the arrays", "a smaller size");

    /* First touch with the same static schedule as the kernels: pages land near their thread. */
#pragma omp parallel for schedule(static)
    for (long long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }

    const double scalar = 3.0;
    const long long reps = o.reps;
    double *times = calloc((size_t)(NK * reps), sizeof *times); /* [kernel][rep] */
    /* Two clocks per kernel and repetition. `times`: this rank's own duration. `joint`: from the
     * opening barrier until every rank has finished (closing barrier). When ranks share a core,
     * one runs while the other waits: their own durations look fast, but the job is not; only
     * the joint time tells the truth about the whole job. */
    double *joint = calloc((size_t)(NK * reps), sizeof *joint);
    double *sums = calloc((size_t)reps, sizeof *sums); /* Sum's result per repetition */
    for (long long k = 0; k < reps; k++) {
        double t;
        MPI_Barrier(MPI_COMM_WORLD); /* all ranks hit memory at the same time */
        t = hpc_now();
#pragma omp parallel for schedule(static)
        for (long long j = 0; j < n; j++) c[j] = a[j];
        times[COPY * reps + k] = hpc_now() - t;
        MPI_Barrier(MPI_COMM_WORLD);
        joint[COPY * reps + k] = hpc_now() - t;

        MPI_Barrier(MPI_COMM_WORLD); /* all ranks hit memory at the same time */
        t = hpc_now();
#pragma omp parallel for schedule(static)
        for (long long j = 0; j < n; j++) b[j] = scalar * c[j];
        times[SCALE * reps + k] = hpc_now() - t;
        MPI_Barrier(MPI_COMM_WORLD);
        joint[SCALE * reps + k] = hpc_now() - t;

        MPI_Barrier(MPI_COMM_WORLD); /* all ranks hit memory at the same time */
        t = hpc_now();
#pragma omp parallel for schedule(static)
        for (long long j = 0; j < n; j++) c[j] = a[j] + b[j];
        times[ADD * reps + k] = hpc_now() - t;
        MPI_Barrier(MPI_COMM_WORLD);
        joint[ADD * reps + k] = hpc_now() - t;

        MPI_Barrier(MPI_COMM_WORLD); /* all ranks hit memory at the same time */
        t = hpc_now();
#pragma omp parallel for schedule(static)
        for (long long j = 0; j < n; j++) a[j] = b[j] + scalar * c[j];
        times[TRIAD * reps + k] = hpc_now() - t;
        MPI_Barrier(MPI_COMM_WORLD);
        joint[TRIAD * reps + k] = hpc_now() - t;

        MPI_Barrier(MPI_COMM_WORLD);
        t = hpc_now();
#pragma omp parallel for schedule(static)
        for (long long j = 0; j < n; j++) c[j] = scalar * c[j];
        times[UPDATE * reps + k] = hpc_now() - t;
        MPI_Barrier(MPI_COMM_WORLD);
        joint[UPDATE * reps + k] = hpc_now() - t;

        MPI_Barrier(MPI_COMM_WORLD);
        t = hpc_now();
        double sum = 0.0;
        /* simd: the reduction may use vector lanes (a scalar add chain would be compute-bound) */
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
        for (long long j = 0; j < n; j++) sum += b[j];
        times[SUM * reps + k] = hpc_now() - t;
        MPI_Barrier(MPI_COMM_WORLD);
        joint[SUM * reps + k] = hpc_now() - t;
        sums[k] = sum;
    }

    /* Expected values, recomputed on scalars the way STREAM does. */
    double ea = 1.0, eb = 2.0, ec = 0.0, worst_sum = 0.0;
    for (long long k = 0; k < reps; k++) {
        ec = ea;
        eb = scalar * ec;
        ec = ea + eb;
        ea = eb + scalar * ec;
        ec = scalar * ec; /* Update */
        double expect = (double)n * eb; /* Sum over b */
        worst_sum = fmax(worst_sum, fabs(sums[k] - expect) / expect);
    }
    const double eps = 1e-13; /* STREAM's tolerance for 8-byte reals */
    /* n equal terms summed in any order: relative error at most about n machine epsilons */
    const double eps_sum = fmax(eps, (double)n * 2.220446049250313e-16);
    double err[3] = {rel_error(a, n, ea), rel_error(b, n, eb), rel_error(c, n, ec)};
    int ok = err[0] <= eps && err[1] <= eps && err[2] <= eps && worst_sum <= eps_sum;
    char msg[256];
    snprintf(msg, sizeof msg,
             "arrays differ from the expected values: relative average errors a=%.3e b=%.3e "
             "c=%.3e (tolerance %.0e), Sum %.3e (tolerance %.0e)",
             err[0], err[1], err[2], eps, worst_sum, eps_sum);

    /* Per rank: best rate from the minimum time over repetitions 1..reps-1. */
    double best[NK];
    for (int kk = 0; kk < NK; kk++) {
        double tmin = INFINITY;
        for (long long k = 1; k < reps; k++) tmin = fmin(tmin, times[kk * reps + k]);
        best[kk] = ARRAYS_MOVED[kk] * bytes_array / tmin / 1e6;
    }
    /* The whole job: each repetition lasts until its slowest rank has finished. */
    double *tmax = rank == 0 ? calloc((size_t)(NK * reps), sizeof *tmax) : NULL;
    double *best_all = rank == 0 ? calloc((size_t)(NK * size), sizeof *best_all) : NULL;
    MPI_Reduce(joint, tmax, NK * (int)reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Gather(best, NK, MPI_DOUBLE, best_all, NK, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    hpc_report rep;
    hpc_report_init(&rep, "stream",
                    "STREAM-like Copy/Scale/Add/Triad + Update/Sum (MB = 10^6 bytes); not a compliant STREAM result",
                    argc, argv, omp_get_max_threads());
    rep.json_path = o.json;
    hpc_kv_int(&rep, "array_elements", n);
    hpc_kv_int(&rep, "bytes_per_array", (long long)bytes_array);
    hpc_kv_num(&rep, "memory_per_rank_mb", 3.0 * bytes_array / 1e6);
    hpc_kv_int(&rep, "repetitions", reps);
    hpc_kv_str(&rep, "timed_repetitions", "all but the first (an untimed warm-up)");
    hpc_kv_str(&rep, "omp_proc_bind", getenv("OMP_PROC_BIND"));
    hpc_kv_str(&rep, "omp_places", getenv("OMP_PLACES"));
    hpc_report_placement(&rep, 1);
    hpc_report_header(&rep);
    hpc_report_validation(&rep, ok, msg);

    hpc_json res;
    js_init(&res);
    if (rank == 0) {
        js_obj_open(&res, NULL);
        js_int(&res, "array_elements", n);
        js_int(&res, "bytes_per_array", (long long)bytes_array);
        js_int(&res, "repetitions", reps);
        js_obj_open(&res, "kernels");
        printf("%-8s %16s %12s %12s %12s\n", "Function", "Best Rate MB/s", "Avg time", "Min time",
               "Max time");
        for (int kk = 0; kk < NK; kk++) {
            double lo = INFINITY, hi = 0.0, sum = 0.0;
            for (long long k = 1; k < reps; k++) {
                double t = tmax[kk * reps + k];
                lo = fmin(lo, t);
                hi = fmax(hi, t);
                sum += t;
            }
            double avg = sum / (double)(reps - 1);
            double rate = ARRAYS_MOVED[kk] * bytes_array * size / lo / 1e6;
            printf("%-8s %16.1f %12.6f %12.6f %12.6f\n", NAMES[kk], rate, avg, lo, hi);
            js_obj_open(&res, NAMES[kk]);
            js_num(&res, "best_mb_s", rate);
            js_num(&res, "avg_time", avg);
            js_num(&res, "min_time", lo);
            js_num(&res, "max_time", hi);
            js_int(&res, "counted_bytes_per_element", ARRAYS_MOVED[kk] * (long long)sizeof(double));
            js_int(&res, "moved_bytes_per_element",
                   (ARRAYS_MOVED[kk] + WRITE_ALLOCATE[kk]) * (long long)sizeof(double));
            js_obj_close(&res);
        }
        js_obj_close(&res);
        printf("Rates count the bytes the source names (B/element:");
        for (int kk = 0; kk < NK; kk++) printf(" %s %d", NAMES[kk], ARRAYS_MOVED[kk] * (int)sizeof(double));
        printf(");\nwith write-allocate the core moves");
        for (int kk = 0; kk < NK; kk++)
            printf(" %s %d", NAMES[kk], (ARRAYS_MOVED[kk] + WRITE_ALLOCATE[kk]) * (int)sizeof(double));
        printf(".\n");
        if (size > 1) {
            printf("%-8s", "rank");
            for (int kk = 0; kk < NK; kk++) printf(" %12s", NAMES[kk]);
            printf("   (best MB/s per rank)\n");
        }
        double agg[NK] = {0};
        js_arr_open(&res, "per_rank");
        for (int r = 0; r < size; r++) {
            js_obj_open(&res, NULL);
            js_int(&res, "rank", r);
            if (size > 1) printf("%-8d", r);
            for (int kk = 0; kk < NK; kk++) {
                double v = best_all[r * NK + kk];
                agg[kk] += v;
                js_num(&res, NAMES[kk], v);
                if (size > 1) printf(" %12.1f", v);
            }
            if (size > 1) printf("\n");
            js_obj_close(&res);
        }
        js_arr_close(&res);
        if (size > 1) {
            printf("%-8s", "sum");
            for (int kk = 0; kk < NK; kk++) printf(" %12.1f", agg[kk]);
            printf("   (aggregate: sum of per-rank best rates)\n");
        }
        js_obj_open(&res, "aggregate");
        for (int kk = 0; kk < NK; kk++) js_num(&res, NAMES[kk], agg[kk]);
        js_obj_close(&res);
        js_obj_close(&res);
        fflush(stdout);
    }
    int code = hpc_report_finish(&rep, res.buf);
    js_free(&res);
    free(a);
    free(b);
    free(c);
    free(times);
    free(joint);
    free(sums);
    free(tmax);
    free(best_all);
    MPI_Finalize();
    return code;
}
