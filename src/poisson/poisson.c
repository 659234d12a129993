/* poisson: 2D Poisson (steady heat) -lap(u) = f on the unit square, N x N interior points,
   Dirichlet zero boundary, solved with red-black Gauss-Seidel on a 2D Cartesian process grid.
   The right-hand side is manufactured from u = sin(pi x) sin(pi y) (f = 2 pi^2 u), so the
   error against the analytic answer is known and checked. --shape NXxNY solves on a rectangle
   instead (same spacing h in x and y, the longer side of length 1, u = sin(pi x/a) sin(pi y/b)):
   one rank can then time the subdomain shape of any decomposition, e.g. a long thin strip.
   Within one colour the update order does not matter, so every process grid and halo-exchange
   variant gives bit-identical numbers.
   Phases per iteration: red sweep, halo exchange (copy + MPI), black sweep, exchange,
   residuum (max norm, MPI_Allreduce). With --fuse the residuum of the inner points is computed
   inside the black sweep, one row behind it, and only a thin ring of points waits for the
   exchange: one pass over memory less per iteration, bit-identical results. Each phase is timed per rank and wrapped in optional
   tracer hooks (mpitrace_begin/_end, provided by build/lib/libmpitrace.so when preloaded).
   The exchange variants (halo.c, halo_nonblocking.c) and the process grid and block split
   (decompose.c) are files of their own, declared in halo.h. */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "halo.h"
#include "json.h"
#include "report.h"
#include "timer.h"

/* Interior points per dimension. GS needs O(N^2) sweeps to converge, so keep the default small
   enough to converge in seconds on one core. */
#ifndef POISSON_N
#define POISSON_N 128
#endif
/* Stop when max-norm residual <= tol * initial residual (default when no --iters is given). */
#ifndef POISSON_TOL
#define POISSON_TOL 1e-6
#endif
/* Upper bound on sweeps when only a tolerance is given. */
#ifndef POISSON_MAX_ITERS
#define POISSON_MAX_ITERS 1000000
#endif
/* Software prefetch distance in doubles for the two rows a sweep or the residuum streams from
   memory (u row i+1, f row i; rows i-1 and i are still in L2). One core's hardware prefetchers
   keep too few lines in flight for this pattern; size it to at least latency x bandwidth of one
   core (about 100 ns x 50 GB/s = 5 KB, i.e. 640 doubles). 0 turns it off. */
#ifndef POISSON_PREFETCH
#define POISSON_PREFETCH 1024
#endif

/* Weak: the solver runs without the tracer; with it, each phase appears as a user region. */
extern void mpitrace_begin(const char *name) __attribute__((weak));
extern void mpitrace_end(const char *name) __attribute__((weak));
#define REGION_BEGIN(n) do { if (mpitrace_begin) mpitrace_begin(n); } while (0)
#define REGION_END(n) do { if (mpitrace_end) mpitrace_end(n); } while (0)

enum exchange_kind { BLOCKING, SENDRECV, NONBLOCKING, NAIVE, N_EXCHANGES };
static const char *EXCHANGE_NAMES[] = {"blocking", "sendrecv", "nonblocking", "naive"};

static const char *ALLOWED = "--n N (1..1000000), --grid PxQ, "
                             "--shape NXxNY, --exchange blocking|sendrecv|nonblocking|naive, --iters K (1..100000000), "
                             "--tol T (0..1), --heavy F (1..16), --fuse, --json FILE, --help";

typedef struct {
    long long n, iters;
    long long nx, ny; /* global interior points along x and y: N x N, or --shape */
    double tol;
    double heavy; /* rows of the first rank along x over those of every other rank (1: even split) */
    int p, q; /* 0: MPI_Dims_create chooses */
    int fuse; /* residuum inside the black sweep */
    enum exchange_kind exchange;
    const char *json;
} options;

/* Timers, seconds: compute phases and MPI call classes. */
enum { T_COPY, T_RED, T_BLACK, T_RESID, T_HALO, T_ALLRED, T_TOTAL, NT };

typedef struct {
    MPI_Comm cart;
    int coords[2], dims[2];
    int nbr[N_FACES];        /* neighbours across each face, MPI_PROC_NULL at the domain boundary */
    long long nx, ny;        /* local interior points */
    long long ix0, iy0;      /* global index of local point 0 (the halo) */
    long long stride;        /* ny + 2 */
    double *u, *h2f;         /* (nx+2) x (ny+2), row-major in x */
    double *sbuf, *rbuf;     /* 4 faces: x-lo, x-hi (ny each), y-lo, y-hi (nx each) */
    halo_faces faces;        /* the same four faces as the exchange functions see them */
    unsigned char *inner_done; /* --fuse: row i's columns 2..ny-1 already have their residual */
    double fused_max;          /* --fuse: max residual found inside the black sweep */
    enum exchange_kind exchange;
    double t[NT];
} domain;

static options parse(int argc, char **argv, int rank, int size)
{
    options o = {POISSON_N, 0, 0, 0, -1.0, 1.0, 0, 0, 0, SENDRECV, NULL};
    int have_n = 0, have_shape = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--n")) {
            o.n = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 1000000, "1..1000000");
            have_n = 1;
        } else if (!strcmp(a, "--shape")) {
            const char *v = hpc_arg_value(argc, argv, &i, ALLOWED);
            char tail;
            if (sscanf(v, "%lldx%lld%c", &o.nx, &o.ny, &tail) != 2 || o.nx < 1 || o.ny < 1 ||
                o.nx > 100000000 || o.ny > 100000000) {
                char what[160];
                snprintf(what, sizeof what, "'%s' is not NXxNY with 1 <= NX, NY <= 100000000", v);
                hpc_usage_error(a, what, "NXxNY interior points along x and y, e.g. 3600x10");
            }
            have_shape = 1;
        } else if (!strcmp(a, "--iters"))
            o.iters = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 100000000, "1..100000000");
        else if (!strcmp(a, "--tol"))
            o.tol = hpc_arg_double(a, hpc_arg_value(argc, argv, &i, ALLOWED), 0.0, 1.0, "0..1 (relative to the initial residual)");
        else if (!strcmp(a, "--heavy"))
            o.heavy = hpc_arg_double(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1.0, 16.0, "1..16 (times the rows of the other ranks)");
        else if (!strcmp(a, "--grid")) {
            const char *v = hpc_arg_value(argc, argv, &i, ALLOWED);
            char allowed[128], tail;
            snprintf(allowed, sizeof allowed, "PxQ with P*Q = %d ranks (e.g. %dx1, 1x%d)", size, size, size);
            if (sscanf(v, "%dx%d%c", &o.p, &o.q, &tail) != 2 || o.p < 1 || o.q < 1) {
                char what[160];
                snprintf(what, sizeof what, "'%s' is not PxQ with P, Q >= 1", v);
                hpc_usage_error(a, what, allowed);
            }
            if ((long long)o.p * o.q != size) {
                char what[160];
                snprintf(what, sizeof what, "%dx%d needs %lld ranks, this run has %d", o.p, o.q,
                         (long long)o.p * o.q, size);
                hpc_usage_error(a, what, allowed);
            }
        } else if (!strcmp(a, "--exchange")) {
            const char *v = hpc_arg_value(argc, argv, &i, ALLOWED);
            int k = -1;
            for (int e = 0; e < N_EXCHANGES; e++)
                if (!strcmp(v, EXCHANGE_NAMES[e])) k = e;
            if (k < 0) {
                char what[160];
                snprintf(what, sizeof what, "'%s' is not a known variant", v);
                hpc_usage_error(a, what, "blocking, sendrecv, nonblocking, naive");
            }
            o.exchange = (enum exchange_kind)k;
        } else if (!strcmp(a, "--fuse"))
            o.fuse = 1;
        else if (!strcmp(a, "--json"))
            o.json = hpc_arg_value(argc, argv, &i, ALLOWED);
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0)
                printf("usage: poisson [--n N | --shape NXxNY] [--grid PxQ]\n"
                       "               [--exchange blocking|sendrecv|nonblocking|naive]\n"
                       "               [--iters K] [--tol T] [--fuse] [--json FILE]\n"
                       "  Red-black Gauss-Seidel for -lap(u) = 2 pi^2 sin(pi x) sin(pi y) on N x N points.\n"
                       "  --n N        interior points per dimension (default %d)\n"
                       "  --shape NXxNY  a rectangle of NX x NY interior points instead (same spacing\n"
                       "               in x and y; rows along y are contiguous in memory)\n"
                       "  --grid PxQ   process grid, P along x (default: MPI_Dims_create); uneven splits allowed\n"
                       "  --exchange   halo exchange: blocking (Send/Recv ordered by parity), sendrecv (default),\n"
                       "               nonblocking (Isend/Irecv/Waitall), naive (every rank sends up,\n"
                       "               then receives from below: the 2014 code's order, a chain)\n"
                       "  --iters K    stop after K sweeps (alone: exactly K)\n"
                       "  --tol T      stop when residual <= T x initial residual (default %g without --iters)\n"
                       "  --heavy F    the first rank along x gets F times the rows of each other rank\n"
                       "               (a deliberate load imbalance; default 1, the even split)\n"
                       "  --fuse       compute the residuum inside the black sweep (one memory pass less;\n"
                       "               identical results)\n"
                       "  --json FILE  also write the report as JSON (FILE must not exist)\n",
                       POISSON_N, POISSON_TOL);
            MPI_Finalize();
            exit(0);
        } else
            hpc_usage_error(a, "unknown argument", ALLOWED);
    }
    if (have_n && have_shape)
        hpc_usage_error("--shape", "given together with --n", "either --n N (a square) or --shape NXxNY");
    if (!have_shape) o.nx = o.ny = o.n;
    if (o.iters == 0 && o.tol < 0) o.tol = POISSON_TOL;
    if (o.iters == 0) o.iters = POISSON_MAX_ITERS;
    if (o.tol < 0) o.tol = 0.0;
    return o;
}

#define AT(d, i, j) ((d)->u[(i) * (d)->stride + (j)])

/* Faces into the send buffer: [x-lo row | x-hi row | y-lo column | y-hi column]. */
static void pack(domain *d)
{
    const long long nx = d->nx, ny = d->ny;
    double *s = d->sbuf;
    memcpy(s, &AT(d, 1, 1), (size_t)ny * sizeof(double));
    memcpy(s + ny, &AT(d, nx, 1), (size_t)ny * sizeof(double));
    for (long long i = 0; i < nx; i++) {
        s[2 * ny + i] = AT(d, i + 1, 1);
        s[2 * ny + nx + i] = AT(d, i + 1, ny);
    }
}

/* Received faces into the halo. Faces at the domain boundary were not received: the halo
   there holds the Dirichlet zero and must stay so. */
static void unpack(domain *d)
{
    const long long nx = d->nx, ny = d->ny;
    const double *r = d->rbuf;
    if (d->nbr[FACE_XLO] != MPI_PROC_NULL) memcpy(&AT(d, 0, 1), r, (size_t)ny * sizeof(double));
    if (d->nbr[FACE_XHI] != MPI_PROC_NULL) memcpy(&AT(d, nx + 1, 1), r + ny, (size_t)ny * sizeof(double));
    for (long long i = 0; i < nx; i++) {
        if (d->nbr[FACE_YLO] != MPI_PROC_NULL) AT(d, i + 1, 0) = r[2 * ny + i];
        if (d->nbr[FACE_YHI] != MPI_PROC_NULL) AT(d, i + 1, ny + 1) = r[2 * ny + nx + i];
    }
}

/* The variants by --exchange name (enum exchange_kind's order). */
static void (*const EXCHANGES[N_EXCHANGES])(const halo_faces *) = {halo_blocking, halo_sendrecv,
                                                                    halo_nonblocking, halo_naive};

/* The faces of d's send and receive buffers, as the exchange functions see them. */
static void faces_init(domain *d)
{
    const int ny = (int)d->ny, nx = (int)d->nx;
    const int off[N_FACES] = {0, ny, 2 * ny, 2 * ny + nx};
    const int cnt[N_FACES] = {ny, ny, nx, nx};
    halo_faces *h = &d->faces;
    h->comm = d->cart;
    h->coords[0] = d->coords[0];
    h->coords[1] = d->coords[1];
    for (int k = 0; k < N_FACES; k++) {
        h->peer[k] = d->nbr[k];
        h->count[k] = cnt[k];
        h->send[k] = d->sbuf + off[k];
        h->recv[k] = d->rbuf + off[k];
    }
}

static void exchange(domain *d)
{
    double t;

    REGION_BEGIN("copy");
    t = hpc_now();
    pack(d);
    d->t[T_COPY] += hpc_now() - t;
    REGION_END("copy");

    REGION_BEGIN("exchange");
    t = hpc_now();
    EXCHANGES[d->exchange](&d->faces);
    d->t[T_HALO] += hpc_now() - t;
    REGION_END("exchange");

    REGION_BEGIN("copy");
    t = hpc_now();
    unpack(d); /* for nonblocking: only after Waitall, the data is there */
    d->t[T_COPY] += hpc_now() - t;
    REGION_END("copy");
}

/* Prefetch the cache line POISSON_PREFETCH doubles past p. Integer arithmetic, because near the
   end of the grid that address lies outside it (a prefetch never faults). */
static inline void prefetch_ahead(const double *p)
{
#if POISSON_PREFETCH > 0
    __builtin_prefetch((const void *)((uintptr_t)p + POISSON_PREFETCH * sizeof(double)));
#else
    (void)p;
#endif
}

/* Gauss-Seidel update of the points j0, j0 + 2, ... <= ny of row i (one colour), in blocks of
   16 points (two cache lines per row), prefetching the streamed rows ahead. GCC unrolls the block
   into scalar code; from memory that measured faster than its stride-2 vector forms. */
static inline void sweep_row(double *u, const double *g, long long i, long long j0, long long ny,
                             long long st)
{
    long long j = j0;
    for (; j + 15 <= ny; j += 16) {
        prefetch_ahead(&u[(i + 1) * st + j]);
        prefetch_ahead(&u[(i + 1) * st + j + 8]);
        prefetch_ahead(&g[i * st + j]);
        prefetch_ahead(&g[i * st + j + 8]);
        for (long long jj = j; jj < j + 16; jj += 2) {
            long long k = i * st + jj;
            u[k] = 0.25 * (u[k - st] + u[k + st] + u[k - 1] + u[k + 1] + g[k]);
        }
    }
    for (; j <= ny; j += 2) {
        long long k = i * st + j;
        u[k] = 0.25 * (u[k - st] + u[k + st] + u[k - 1] + u[k + 1] + g[k]);
    }
}

/* One colour of Gauss-Seidel: colour 0 (red) where global i + j is even, 1 (black) odd. */
static void sweep(domain *d, int colour)
{
    const char *name = colour ? "black" : "red";
    REGION_BEGIN(name);
    double t = hpc_now();
    const long long nx = d->nx, ny = d->ny, st = d->stride;
    double *u = d->u;
    const double *g = d->h2f;
#pragma omp parallel for schedule(static)
    for (long long i = 1; i <= nx; i++) {
        long long j0 = ((d->ix0 + i + d->iy0 + 1) % 2 == colour) ? 1 : 2;
        sweep_row(u, g, i, j0, ny, st);
    }
    d->t[colour ? T_BLACK : T_RED] += hpc_now() - t;
    REGION_END(name);
}

/* |f - A u| at point k. The one expression every residuum path uses, so the separate pass and
   the fused one (--fuse) give bit-identical maxima. */
static inline double point_residual(const double *u, const double *g, long long k, long long st,
                                    double inv_h2)
{
    return fabs((g[k] + u[k - st] + u[k + st] + u[k - 1] + u[k + 1] - 4.0 * u[k]) * inv_h2);
}

/* max(rmax, point_residual over columns j0..j1 of row i). GCC does not vectorise a float max
   reduction (NaN order; a scalar maxsd chain is compute-bound), so keep eight running maxima,
   one per vector lane; max is exact, so the result is the same. prefetch: the rows below come
   from memory (not so in the fused sweep, which trails the sweep by one row). */
static inline double row_residual_max(const double *u, const double *g, long long i,
                                      long long j0, long long j1, long long st, double inv_h2,
                                      double rmax, int prefetch)
{
    double m[8] = {rmax, rmax, rmax, rmax, rmax, rmax, rmax, rmax};
    long long j = j0;
    for (; j + 7 <= j1; j += 8) {
        if (prefetch) {
            prefetch_ahead(&u[(i + 1) * st + j]);
            prefetch_ahead(&g[i * st + j]);
        }
#pragma omp simd
        for (int l = 0; l < 8; l++) {
            double r = point_residual(u, g, i * st + j + l, st, inv_h2);
            m[l] = r > m[l] ? r : m[l];
        }
    }
    for (; j <= j1; j++) {
        double r = point_residual(u, g, i * st + j, st, inv_h2);
        m[0] = r > m[0] ? r : m[0];
    }
    for (int l = 0; l < 8; l++) rmax = m[l] > rmax ? m[l] : rmax;
    return rmax;
}

/* Max-norm of f - A u over the whole grid (A = 5-point -lap / h^2). Max is exact in floating
   point, so the value does not depend on the decomposition. */
static double residuum(domain *d, double h2)
{
    REGION_BEGIN("residuum");
    double t = hpc_now();
    const long long nx = d->nx, ny = d->ny, st = d->stride;
    const double *u = d->u, *g = d->h2f;
    const double inv_h2 = 1.0 / h2; /* multiply, not divide: the loop stays cheap */
    double rmax = 0.0;
#pragma omp parallel for reduction(max : rmax) schedule(static)
    for (long long i = 1; i <= nx; i++)
        rmax = row_residual_max(u, g, i, 1, ny, st, inv_h2, rmax, 1);
    d->t[T_RESID] += hpc_now() - t;
    t = hpc_now();
    double global = 0.0;
    MPI_Allreduce(&rmax, &global, 1, MPI_DOUBLE, MPI_MAX, d->cart);
    d->t[T_ALLRED] += hpc_now() - t;
    REGION_END("residuum");
    return global;
}

/* --heavy F: coordinate 0 takes F shares of the n points, every other coordinate one share
   (rounded to whole points, at least one point each), the others split the rest evenly with
   split(). F = 1 is split() itself. A deliberate load imbalance: the heavy rank computes about
   F times as long, the others wait for it. */
static void split_heavy(long long n, int p, int c, double heavy, long long *len, long long *start)
{
    if (p == 1 || heavy == 1.0) {
        split(n, p, c, len, start);
        return;
    }
    long long first = llround((double)n * heavy / (heavy + (double)(p - 1)));
    if (first > n - (p - 1)) first = n - (p - 1);
    if (first < 1) first = 1;
    if (c == 0) {
        *len = first;
        *start = 0;
        return;
    }
    split(n - first, p - 1, c - 1, len, start);
    *start += first;
}

/* --fuse, part 1: the black sweep, and one row behind it the residual of the points whose whole
   stencil is final and local. Each thread takes one block of rows, as schedule(static)
   would; row r's residual needs rows r-1..r+1 swept, so it is computed after row r+1,
   for rows strictly inside the thread's block and columns 2..ny-1. What it cannot do here
   (block edge rows, the first and last column: their stencils reach another thread's rows or
   the halo, which the next exchange refreshes) is left to residuum_rest(). */
static void sweep_black_fused(domain *d, double h2)
{
    REGION_BEGIN("black");
    double t = hpc_now();
    const long long nx = d->nx, ny = d->ny, st = d->stride;
    double *u = d->u;
    const double *g = d->h2f;
    const double inv_h2 = 1.0 / h2;
    double rmax = 0.0;
    memset(d->inner_done, 0, (size_t)(nx + 2));
#pragma omp parallel reduction(max : rmax)
    {
        long long len, lo;
        split(nx, omp_get_num_threads(), omp_get_thread_num(), &len, &lo);
        const long long i0 = lo + 1, i1 = lo + len;
        for (long long i = i0; i <= i1; i++) {
            long long j0 = ((d->ix0 + i + d->iy0 + 1) % 2 == 1) ? 1 : 2;
            sweep_row(u, g, i, j0, ny, st);
            const long long r = i - 1;
            if (r > i0) {
                rmax = row_residual_max(u, g, r, 2, ny - 1, st, inv_h2, rmax, 0);
                d->inner_done[r] = 1;
            }
        }
    }
    d->fused_max = rmax;
    d->t[T_BLACK] += hpc_now() - t;
    REGION_END("black");
}

/* --fuse, part 2 (after the exchange): the residual of every point the fused sweep left out,
   combined with its maximum, then the MPI_Allreduce. Same value as residuum(). */
static double residuum_rest(domain *d, double h2)
{
    REGION_BEGIN("residuum");
    double t = hpc_now();
    const long long nx = d->nx, ny = d->ny, st = d->stride;
    const double *u = d->u, *g = d->h2f;
    const double inv_h2 = 1.0 / h2;
    double rmax = d->fused_max;
#pragma omp parallel for reduction(max : rmax) schedule(static)
    for (long long i = 1; i <= nx; i++) {
        if (d->inner_done[i]) {
            for (long long j = 1; j <= ny; j += (ny > 1 ? ny - 1 : 1)) {
                double v = point_residual(u, g, i * st + j, st, inv_h2);
                rmax = v > rmax ? v : rmax;
            }
        } else
            rmax = row_residual_max(u, g, i, 1, ny, st, inv_h2, rmax, 1);
    }
    d->t[T_RESID] += hpc_now() - t;
    t = hpc_now();
    double global = 0.0;
    MPI_Allreduce(&rmax, &global, 1, MPI_DOUBLE, MPI_MAX, d->cart);
    d->t[T_ALLRED] += hpc_now() - t;
    REGION_END("residuum");
    return global;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o = parse(argc, argv, rank, size);
    if (o.json) hpc_check_json_path(o.json);

    domain d;
    memset(&d, 0, sizeof d);
    d.exchange = o.exchange;
    d.dims[0] = o.p;
    d.dims[1] = o.q;
    topology(MPI_COMM_WORLD, d.dims, &d.cart, d.coords, d.nbr);
    if (d.dims[0] > o.nx || d.dims[1] > o.ny) {
        char what[160], allowed[160];
        snprintf(what, sizeof what, "grid %dx%d has more processes than the %lld x %lld points",
                 d.dims[0], d.dims[1], o.nx, o.ny);
        snprintf(allowed, sizeof allowed, "P <= %lld, Q <= %lld", o.nx, o.ny);
        hpc_usage_error(o.p ? "--grid" : "--n", what, allowed);
    }
    long long sx, sy;
    split_heavy(o.nx, d.dims[0], d.coords[0], o.heavy, &d.nx, &sx);
    split(o.ny, d.dims[1], d.coords[1], &d.ny, &sy);
    d.ix0 = sx; /* local i = 1 is global point sx + 1 */
    d.iy0 = sy;
    d.stride = d.ny + 2;

    {
        double need = 2.0 * (double)(d.nx + 2) * (double)(d.ny + 2) * sizeof(double) * hpc_ranks_on_host();
        unsigned long long avail = hpc_mem_available();
        char what[200];
        snprintf(what, sizeof what, "%lld x %lld points need %.0f MB on this host, %.0f MB available",
                 o.nx, o.ny, need / 1e6, (double)avail / 1e6);
        hpc_agree_usage_error(avail && need > 0.9 * (double)avail, "--n", what, "a smaller N");
    }
    size_t cells = (size_t)(d.nx + 2) * (size_t)d.stride;
    d.u = calloc(cells, sizeof(double));
    d.h2f = calloc(cells, sizeof(double));
    d.sbuf = calloc((size_t)(2 * d.nx + 2 * d.ny), sizeof(double));
    d.rbuf = calloc((size_t)(2 * d.nx + 2 * d.ny), sizeof(double));
    d.inner_done = calloc((size_t)(d.nx + 2), 1);
    hpc_agree_usage_error(!d.u || !d.h2f || !d.sbuf || !d.rbuf || !d.inner_done, "--n", "could not allocate the grid", "a smaller N");
    faces_init(&d);

    /* Coordinates scaled to the unit square: x = (global i) * hx, y = (global j) * hy; the
       rectangle's sides are a = (NX+1) h and b = (NY+1) h with h the spacing of the longer one,
       so a = b = 1 and hx = hy = h on a square. u = sin(pi x) sin(pi y) in these coordinates
       solves -lap u = pi^2 (1/a^2 + 1/b^2) u. */
    const long long nmax = o.nx > o.ny ? o.nx : o.ny;
    const double h = 1.0 / (double)(nmax + 1), h2 = h * h, pi = M_PI;
    const double hx = 1.0 / (double)(o.nx + 1), hy = 1.0 / (double)(o.ny + 1);
    const double a = (double)(o.nx + 1) / (double)(nmax + 1), b = (double)(o.ny + 1) / (double)(nmax + 1);
    const double curv = 1.0 / (a * a) + 1.0 / (b * b); /* 2 on the square */
    /* First touch with the sweeps' static schedule: pages land near the threads that use them,
       and the page faults are not charged to the first red sweep. */
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < d.nx + 2; i++)
        for (long long j = 0; j < d.stride; j++) {
            d.u[i * d.stride + j] = 0.0;
            d.h2f[i * d.stride + j] = 0.0;
        }
#pragma omp parallel for schedule(static)
    for (long long i = 1; i <= d.nx; i++)
        for (long long j = 1; j <= d.ny; j++) {
            double x = (double)(d.ix0 + i) * hx, y = (double)(d.iy0 + j) * hy;
            d.h2f[i * d.stride + j] = h2 * curv * pi * pi * sin(pi * x) * sin(pi * y);
        }

    long long cap = o.iters + 1 < 1000000 ? o.iters + 1 : 1000000;
    double *hist = malloc((size_t)cap * sizeof *hist);
    long long nhist = 0, it = 0;

    MPI_Barrier(d.cart);
    double t0 = hpc_now();
    exchange(&d);
    double r0 = residuum(&d, h2), r = r0;
    hist[nhist++] = r0;
    while (it < o.iters && !(o.tol > 0 && r <= o.tol * r0)) {
        sweep(&d, 0);
        exchange(&d);
        if (o.fuse) {
            sweep_black_fused(&d, h2);
            exchange(&d);
            r = residuum_rest(&d, h2);
        } else {
            sweep(&d, 1);
            exchange(&d);
            r = residuum(&d, h2);
        }
        it++;
        if (nhist == cap) {
            cap *= 2;
            hist = realloc(hist, (size_t)cap * sizeof *hist);
        }
        hist[nhist++] = r;
    }
    d.t[T_TOTAL] = hpc_now() - t0;
    double wall = 0.0;
    MPI_Allreduce(&d.t[T_TOTAL], &wall, 1, MPI_DOUBLE, MPI_MAX, d.cart);

    /* Error against the analytic solution, and the bound it must satisfy:
       |u_h - u| <= ||A^-1||_inf * |tau|_inf  with ||A^-1||_inf <= min(a, b)^2 / 8 (1/8 on the
       unit square: w = x (a - x) / 2 solves -lap w = 1, also discretely) and truncation
       |tau| <= h^2/12 (|u_xxxx| + |u_yyyy|) <= pi^4 h^2 (1/a^4 + 1/b^4) / 12 (pi^4 h^2 / 6 on
       the square), plus the algebraic part |u_k - u_h| <= ||A^-1||_inf r_max. A small slack
       covers rounding in r itself. On the square: pi^4 h^2 / 48 + r / 8. */
    double emax = 0.0;
#pragma omp parallel for reduction(max : emax) schedule(static)
    for (long long i = 1; i <= d.nx; i++)
        for (long long j = 1; j <= d.ny; j++) {
            double x = (double)(d.ix0 + i) * hx, y = (double)(d.iy0 + j) * hy;
            double e = fabs(d.u[i * d.stride + j] - sin(pi * x) * sin(pi * y));
            emax = e > emax ? e : emax;
        }
    double error_max = 0.0;
    MPI_Allreduce(&emax, &error_max, 1, MPI_DOUBLE, MPI_MAX, d.cart);
    const double ab = a < b ? a : b, ainv = ab * ab / 8.0;
    double bound = ainv * (pi * pi * pi * pi * h2 * (1.0 / (a * a * a * a) + 1.0 / (b * b * b * b)) / 12.0 + r);
    bound = bound * (1.0 + 1e-9) + 64.0 * DBL_EPSILON;
    int ok = isfinite(r) && isfinite(error_max) && error_max <= bound;
    char msg[256];
    snprintf(msg, sizeof msg, "error_max %.6e exceeds the bound %.6e (pi^4 h^2/48 + residual/8 on the square)",
             error_max, bound);
    int converged = o.tol > 0 && r <= o.tol * r0;

    /* Per-rank record gathered to rank 0: coords, local size, timers. */
    double mine[4 + NT] = {d.coords[0], d.coords[1], (double)d.nx, (double)d.ny};
    memcpy(mine + 4, d.t, sizeof d.t);
    double *all = rank == 0 ? malloc((size_t)size * sizeof mine) : NULL;
    MPI_Gather(mine, 4 + NT, MPI_DOUBLE, all, 4 + NT, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    hpc_report rep;
    hpc_report_init(&rep, "poisson",
                    "2D Poisson, red-black Gauss-Seidel, manufactured solution sin(pi x) sin(pi y)",
                    argc, argv, omp_get_max_threads());
    rep.json_path = o.json;
    char grid[64];
    snprintf(grid, sizeof grid, "%dx%d", d.dims[0], d.dims[1]);
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lld", o.nx, o.ny);
    hpc_kv_int(&rep, "n", o.nx);
    hpc_kv_str(&rep, "shape", shape);
    hpc_kv_str(&rep, "grid", grid);
    hpc_kv_str(&rep, "exchange", EXCHANGE_NAMES[o.exchange]);
    hpc_kv_bool(&rep, "fuse", o.fuse);
    hpc_kv_num(&rep, "heavy", o.heavy);
    hpc_kv_int(&rep, "max_iterations", o.iters);
    hpc_kv_num(&rep, "tol", o.tol);
    hpc_kv_num(&rep, "h", h);
    hpc_kv_str(&rep, "tracer_hooks", mpitrace_begin ? "active" : "absent");
    hpc_report_placement(&rep, 1);
    hpc_report_header(&rep);
    hpc_report_validation(&rep, ok, msg);

    hpc_json res;
    js_init(&res);
    if (rank == 0) {
        double lups = wall > 0 ? (double)o.nx * (double)o.ny * (double)it / wall : 0.0;
        printf("iterations              = %lld%s\n", it, converged ? " (converged)" : "");
        printf("initial_residual        = %.6e\n", r0);
        printf("final_residual          = %.6e\n", r);
        printf("error_max               = %.6e\n", error_max);
        printf("error_bound             = %.6e\n", bound);
        printf("wall_time               = %.6f s\n", wall);
        printf("lattice_updates_per_sec = %.4e\n", lups);
        long long every = nhist > 10 ? (nhist - 1) / 10 : 1;
        printf("%10s %14s\n", "iteration", "residual");
        for (long long k = 0; k < nhist; k++)
            if (k % every == 0 || k == nhist - 1) printf("%10lld %14.6e\n", k, hist[k]);
        printf("%5s %7s %11s %10s %10s %10s %10s %10s %10s %10s\n", "rank", "coords", "local",
               "copy[s]", "red[s]", "black[s]", "resid[s]", "halo[s]", "allred[s]", "total[s]");
        for (int q = 0; q < size; q++) {
            const double *m = all + (size_t)q * (4 + NT);
            char co[32], lo[32];
            snprintf(co, sizeof co, "%d,%d", (int)m[0], (int)m[1]);
            snprintf(lo, sizeof lo, "%lldx%lld", (long long)m[2], (long long)m[3]);
            printf("%5d %7s %11s", q, co, lo);
            for (int k = 0; k < NT; k++) printf(" %10.6f", m[4 + k]);
            printf("\n");
        }

        js_obj_open(&res, NULL);
        js_int(&res, "n", o.nx);
        js_arr_open(&res, "shape");
        js_int(&res, NULL, o.nx);
        js_int(&res, NULL, o.ny);
        js_arr_close(&res);
        js_arr_open(&res, "grid");
        js_int(&res, NULL, d.dims[0]);
        js_int(&res, NULL, d.dims[1]);
        js_arr_close(&res);
        js_str(&res, "exchange", EXCHANGE_NAMES[o.exchange]);
        js_bool(&res, "fuse", o.fuse);
        js_num(&res, "heavy", o.heavy);
        js_int(&res, "iterations", it);
        js_bool(&res, "converged", converged);
        js_num(&res, "tol", o.tol);
        js_str(&res, "residual_norm", "max |f - A u|");
        js_arr_open(&res, "residual_history");
        for (long long k = 0; k < nhist; k++) js_num(&res, NULL, hist[k]);
        js_arr_close(&res);
        js_num(&res, "final_residual", r);
        js_num(&res, "error_max", error_max);
        js_num(&res, "error_bound", bound);
        js_num(&res, "h", h);
        js_num(&res, "wall_time", wall);
        js_num(&res, "lattice_updates_per_sec", lups);
        js_arr_open(&res, "per_rank");
        for (int q = 0; q < size; q++) {
            const double *m = all + (size_t)q * (4 + NT);
            js_obj_open(&res, NULL);
            js_int(&res, "rank", q);
            js_arr_open(&res, "coords");
            js_int(&res, NULL, (long long)m[0]);
            js_int(&res, NULL, (long long)m[1]);
            js_arr_close(&res);
            js_arr_open(&res, "local");
            js_int(&res, NULL, (long long)m[2]);
            js_int(&res, NULL, (long long)m[3]);
            js_arr_close(&res);
            js_obj_open(&res, "compute");
            js_num(&res, "copy", m[4 + T_COPY]);
            js_num(&res, "red", m[4 + T_RED]);
            js_num(&res, "black", m[4 + T_BLACK]);
            js_num(&res, "residuum", m[4 + T_RESID]);
            js_obj_close(&res);
            js_obj_open(&res, "mpi");
            js_num(&res, "halo", m[4 + T_HALO]);
            js_num(&res, "allreduce", m[4 + T_ALLRED]);
            js_obj_close(&res);
            js_num(&res, "total", m[4 + T_TOTAL]);
            js_obj_close(&res);
        }
        js_arr_close(&res);
        js_obj_close(&res);
        fflush(stdout);
    }
    int code = hpc_report_finish(&rep, res.buf);
    js_free(&res);
    free(all);
    free(hist);
    free(d.u);
    free(d.h2f);
    free(d.sbuf);
    free(d.rbuf);
    free(d.inner_done);
    MPI_Comm_free(&d.cart);
    MPI_Finalize();
    return code;
}
