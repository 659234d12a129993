/* The ping-pong lab's driver. Ranks 0 and 1 time ping-pongs through your pingpong() in
   pingpong_loop.c, one call per message size, and this file checks what your code did: the
   payload that arrived (and that nothing else changed), each message's size and partner, and
   the shape of the timed loop, watched through MPI's profiling interface while pingpong() runs
   (the warm-up round trips before the timer starts, an MPI_Barrier just before it, the
   repetitions between your two MPI_Wtime calls, and the time you return: half a round trip).
   Do not edit it: the grader builds your pingpong_loop.c with its own copy.

   With --max-bytes N it runs the sizes the course's pingpong kernel runs (0 B, then 1 B .. N in
   powers of two) with the kernel's repetitions and warm-up, so its times compare with the
   kernel's run for run; --sizes a,b,c runs those sizes instead.

   usage: pingpong_lab (--max-bytes N | --sizes LIST) [--reps R] [--warmup W] [--json FILE]
          exactly 2 ranks; N and the sizes 0 .. 16 MiB */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Yours, in pingpong_loop.c. */
double pingpong(void *sbuf, void *rbuf, int bytes, int reps, int warmup, int partner, MPI_Comm comm);

/* The course's kernel's policy (src/pingpong/pingpong.c): 1000 repetitions, fewer for large
   messages so at most 40 MiB move per size; a warm-up of a tenth (at least 2), 1000 more
   round trips before the first size. */
#define KERNEL_REPS 1000
#define KERNEL_VOLUME (40LL << 20)
#define FIRST_CONTACT 1000
#define MAX_BYTES (16 << 20)
#define MAX_SIZES 64
#define GUARD 64       /* bytes after each buffer's message: a longer message shows there */
#define SLACK 8        /* buffers hold SLACK times the largest message: a count in the wrong unit
                          sends past the message, not past the allocation */
#define WHY 400

/* --- the watch: what pingpong() asks of MPI, counted while it runs ------------------------ */

enum { EV_NONE, EV_MSG, EV_BARRIER, EV_OTHER };

typedef struct {
    long sends, recvs, barriers;
    int after_barrier; /* the MPI call just before this MPI_Wtime was an MPI_Barrier */
    double value;
} stamp;

static struct {
    int on;
    long sends, recvs, barriers, sendrecvs, wtimes;
    int last;             /* EV_*: the kind of the last MPI call */
    stamp first, last_stamp;
    char wrong[WHY];      /* the first message of a wrong size or partner, in words */
    int into_sbuf;        /* a receive into the send buffer */
    int from_rbuf;        /* a send from the receive buffer */
    /* what this call of pingpong() should do */
    void *sbuf, *rbuf;
    long bytes;
    int partner;
} watch;

/* Called on the timed path: a few nanoseconds (the type's size is asked once per type), so the
   watched loop times as the kernel's unwatched one does. */
static void message(const char *call, const void *buf, int count, MPI_Datatype type, int peer, int is_recv)
{
    static MPI_Datatype known = MPI_DATATYPE_NULL;
    static int known_size;
    if (!watch.on) return;
    if (type != known) {
        PMPI_Type_size(type, &known_size);
        known = type;
    }
    int size = known_size;
    long got = (long)count * size;
    if (is_recv) {
        watch.recvs++;
        if (buf == watch.sbuf && watch.bytes > 0) watch.into_sbuf = 1;
    } else {
        watch.sends++;
        if (buf == watch.rbuf && watch.bytes > 0) watch.from_rbuf = 1;
    }
    watch.last = EV_MSG;
    if (watch.wrong[0] || (got == watch.bytes && (peer == watch.partner || peer == MPI_ANY_SOURCE))) return;
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    PMPI_Type_get_name(type, name, &len);
    if (got != watch.bytes)
        snprintf(watch.wrong, WHY, "%s of count %d x %s (%d bytes each) = %ld bytes, expected %ld bytes: the count "
                 "is in elements of the datatype (MPI_BYTE and count = bytes, or bytes / the type's size)",
                 call, count, name[0] ? name : "a datatype", size, got, watch.bytes);
    else if (peer != watch.partner && peer != MPI_ANY_SOURCE)
        snprintf(watch.wrong, WHY, "%s %s rank %d, expected the partner, rank %d", call, is_recv ? "from" : "to", peer,
                 watch.partner);
}

static void note(int kind)
{
    if (watch.on) watch.last = kind;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    message("MPI_Send", buf, count, type, dest, 0);
    return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    message("MPI_Ssend", buf, count, type, dest, 0);
    return PMPI_Ssend(buf, count, type, dest, tag, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    message("MPI_Isend", buf, count, type, dest, 0);
    return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    message("MPI_Recv", buf, count, type, source, 1);
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    message("MPI_Irecv", buf, count, type, source, 1);
    return PMPI_Irecv(buf, count, type, source, tag, comm, req);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    if (watch.on) watch.sendrecvs++;
    note(EV_MSG);
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status);
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    note(EV_OTHER);
    return PMPI_Wait(req, status);
}

int MPI_Barrier(MPI_Comm comm)
{
    int rc = PMPI_Barrier(comm);
    if (watch.on) watch.barriers++;
    note(EV_BARRIER);
    return rc;
}

double MPI_Wtime(void)
{
    double t = PMPI_Wtime();
    if (watch.on) {
        stamp s = {watch.sends, watch.recvs, watch.barriers, watch.last == EV_BARRIER, t};
        if (watch.wtimes++ == 0) watch.first = s;
        watch.last_stamp = s;
    }
    note(EV_OTHER);
    return t;
}

/* --- the payload --------------------------------------------------------------------------- */

/* A byte pattern per size and sender (as the kernel's), so a stale or misrouted buffer is caught. */
static unsigned char pattern(long i, long bytes, int sender)
{
    uint32_t s = (uint32_t)(bytes * 2654435761u) ^ (uint32_t)(sender * 40503u + 1u);
    return (unsigned char)((s + (uint32_t)i * 2246822519u) >> 24);
}

static long first_wrong(const unsigned char *b, long n, long bytes, int sender)
{
    for (long i = 0; i < n; i++)
        if (b[i] != pattern(i, bytes, sender)) return i;
    return -1;
}

/* What is wrong with the buffers after a call, in words ("" when all is right). */
static void payload(char *why, const unsigned char *sbuf, const unsigned char *rbuf, long n, int rank,
                    int partner)
{
    why[0] = '\0';
    long bad = first_wrong(rbuf, n, n, partner);
    long own = first_wrong(sbuf, n, n, rank);
    if (bad >= 0) {
        long zero = 0;
        while (zero < n && rbuf[zero] == 0) zero++;
        if (zero == n && watch.into_sbuf)
            snprintf(why, WHY, "nothing arrived in the receive buffer: the message was received into the send buffer "
                     "(receive into rbuf, send from sbuf)");
        else if (zero == n)
            snprintf(why, WHY, "nothing arrived in the receive buffer (all %ld bytes still 0)", n);
        else if (first_wrong(rbuf, n, n, rank) < 0)
            snprintf(why, WHY, "the receive buffer holds this rank's own message: rank %d sent back the message it "
                     "received (from its receive buffer) instead of its own send buffer", partner);
        else if (bad > 0 && rbuf[bad] == 0)
            snprintf(why, WHY, "only the first %ld of %ld bytes arrived (byte %ld on is still 0): a count too "
                     "small (the count is in elements of the datatype)", bad, n, bad);
        else
            snprintf(why, WHY, "byte %ld of %ld in the receive buffer differs from rank %d's message", bad, n, partner);
        return;
    }
    for (long i = n; i < n + GUARD; i++)
        if (rbuf[i] != 0xA5) {
            snprintf(why, WHY, "the receive buffer was written past the %ld bytes of the message (byte %ld changed): "
                     "a count or datatype too large", n, i);
            return;
        }
    if (own >= 0)
        snprintf(why, WHY, "the send buffer changed (byte %ld): a ping-pong only reads it", own);
}

/* --- the timed loop ------------------------------------------------------------------------ */

/* What is wrong with the loop's shape or the time returned, in words ("" when all is right). */
static void timing(char *why, double t, int reps, int warmup)
{
    why[0] = '\0';
    const stamp *a = &watch.first, *b = &watch.last_stamp;
    if (watch.sendrecvs) {
        snprintf(why, WHY, "pingpong() calls MPI_Sendrecv: both directions at once is an exchange, not a ping-pong "
                 "(one rank sends, the other receives, then back)");
    } else if (watch.wtimes < 2) {
        snprintf(why, WHY, "MPI_Wtime was called %ld time(s): time the repetitions with two calls, one just after "
                 "the barrier and one after the last repetition", watch.wtimes);
    } else if (warmup > 0 && a->sends == 0 && a->recvs == 0) {
        snprintf(why, WHY, "no warm-up: the timer starts before the first message, so the timed round trips include "
                 "the first contact (connections and buffers set up on first use); make %d untimed round trips first",
                 warmup);
    } else if (a->sends != warmup || a->recvs != warmup) {
        snprintf(why, WHY, "%ld sends and %ld receives before the timer started, expected the %d warm-up round trips "
                 "(one send and one receive each)", a->sends, a->recvs, warmup);
    } else if (b->sends - a->sends != reps || b->recvs - a->recvs != reps) {
        snprintf(why, WHY, "%ld sends and %ld receives between the first and the last MPI_Wtime, expected %d of each "
                 "(one round trip per repetition)", b->sends - a->sends, b->recvs - a->recvs, reps);
    } else if (!a->after_barrier && b->barriers > a->barriers) {
        snprintf(why, WHY, "the timer starts before the MPI_Barrier: the timed region includes the wait at the "
                 "barrier for the partner; start the timer just after it");
    } else if (!a->after_barrier && a->barriers == 0) {
        snprintf(why, WHY, "no MPI_Barrier before the timer starts: the two ranks start timing at different moments "
                 "(an unsynchronised start); call MPI_Barrier after the warm-up, then MPI_Wtime");
    } else if (!a->after_barrier) {
        snprintf(why, WHY, "the MPI_Barrier is not the last MPI call before the timer starts (messages come "
                 "between them): the ranks are no longer in step when timing starts; move it just before MPI_Wtime");
    } else {
        double want = (b->value - a->value) / (2.0 * reps);
        double ratio = want > 0 ? t / want : NAN;
        if (!(fabs(ratio - 1) <= 1e-6)) {
            const char *hint = "";
            if (fabs(ratio - 2) < 1e-3)
                hint = ": the whole round trip; IMB's t is half of it (divide by 2 x reps)";
            else if (fabs(ratio / (2.0 * reps) - 1) < 1e-3)
                hint = ": the time of all repetitions; t is per message (divide by 2 x reps)";
            else if (fabs(ratio / reps - 1) < 1e-3)
                hint = ": the time of all repetitions, halved; divide by reps too";
            else if (fabs(ratio / 1e6 - 1) < 1e-3 || fabs(ratio / 2e6 - 1) < 1e-3)
                hint = ": microseconds; return seconds";
            snprintf(why, WHY, "returned %.6g s, while your MPI_Wtime calls give (t1 - t0) / (2 x %d) = %.6g s%s", t,
                     reps, want, hint);
        }
    }
}

/* --- the run ------------------------------------------------------------------------------- */

static long reps_for(long bytes)
{
    long r = bytes ? KERNEL_VOLUME / bytes : KERNEL_REPS;
    return r > KERNEL_REPS ? KERNEL_REPS : (r < 1 ? 1 : r);
}

static void usage(int rank, const char *why)
{
    if (rank == 0)
        fprintf(stderr, "pingpong_lab: %s\nusage: pingpong_lab (--max-bytes N | --sizes a,b,c) [--reps R] "
                "[--warmup W] [--json FILE], on 2 ranks; sizes 0..%d\n", why, MAX_BYTES);
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long sizes[MAX_SIZES];
    int nsizes = 0, reps_arg = 0, warm_arg = -1;
    const char *json = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--max-bytes")) {
            long max = atol(argv[i + 1]);
            if (max < 0 || max > MAX_BYTES) usage(rank, "--max-bytes out of range");
            sizes[nsizes++] = 0;
            for (long b = 1; b <= max && nsizes < MAX_SIZES; b *= 2) sizes[nsizes++] = b;
        } else if (!strcmp(argv[i], "--sizes")) {
            for (char *p = argv[i + 1]; *p && nsizes < MAX_SIZES; p += *p == ',') {
                char *end;
                sizes[nsizes] = strtol(p, &end, 10);
                if (end == p || sizes[nsizes] < 0 || sizes[nsizes] > MAX_BYTES) usage(rank, "a size out of range");
                nsizes++;
                p = end;
            }
        } else if (!strcmp(argv[i], "--reps"))
            reps_arg = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup"))
            warm_arg = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--json"))
            json = argv[i + 1];
        else
            usage(rank, "unknown argument");
    }
    if (size != 2) usage(rank, "it runs on exactly 2 ranks");
    if (nsizes == 0) usage(rank, "give --max-bytes or --sizes");
    long max = 0;
    for (int s = 0; s < nsizes; s++) max = sizes[s] > max ? sizes[s] : max;
    size_t cap = (size_t)(max ? max : 1) * SLACK + GUARD;
    unsigned char *sbuf = NULL, *rbuf = NULL;
    if (posix_memalign((void **)&sbuf, 4096, cap) || posix_memalign((void **)&rbuf, 4096, cap)) {
        fprintf(stderr, "ERROR: rank %d: could not allocate 2 x %zu bytes\n", rank, cap);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int partner = 1 - rank;
    double t_us[MAX_SIZES];
    long reps[MAX_SIZES], warm[MAX_SIZES];
    char why[2][MAX_SIZES][WHY]; /* [payload, timing][size] */
    for (int s = 0; s < nsizes; s++) {
        long n = sizes[s];
        reps[s] = reps_arg > 0 ? reps_arg : reps_for(n);
        warm[s] = warm_arg >= 0 ? warm_arg : (reps[s] / 10 < 2 ? 2 : reps[s] / 10) + (s == 0 ? FIRST_CONTACT : 0);
        for (long i = 0; i < n; i++) sbuf[i] = pattern(i, n, rank);
        memset(rbuf, 0, (size_t)n);
        memset(sbuf + n, 0xA5, GUARD);
        memset(rbuf + n, 0xA5, GUARD);
        PMPI_Barrier(MPI_COMM_WORLD);
        memset(&watch, 0, sizeof watch);
        watch.sbuf = sbuf, watch.rbuf = rbuf, watch.bytes = n, watch.partner = partner;
        watch.on = 1;
        double t = pingpong(sbuf, rbuf, (int)n, (int)reps[s], (int)warm[s], partner, MPI_COMM_WORLD);
        watch.on = 0;
        t_us[s] = t * 1e6;
        /* a message of the wrong size or partner first: it names the call, its count and type */
        if (watch.wrong[0])
            snprintf(why[0][s], WHY, "%s", watch.wrong);
        else
            payload(why[0][s], sbuf, rbuf, n, rank, partner);
        if (!why[0][s][0] && watch.into_sbuf)
            snprintf(why[0][s], WHY, "a receive into the send buffer: receive into rbuf, send from sbuf");
        timing(why[1][s], t, (int)reps[s], (int)warm[s]);
    }
    /* each rank's findings, the first of each kind printed; rank 0 gathers rank 1's for the report */
    const char *kinds[2] = {"payload", "timing"};
    for (int k = 0; k < 2; k++) {
        int shown = 0;
        for (int s = 0; s < nsizes && !shown; s++)
            if (why[k][s][0]) {
                printf("ERROR: rank %d, %ld B, %s: %s\n", rank, sizes[s], kinds[k], why[k][s]);
                shown = 1;
            }
        if (!shown) printf("rank %d: %s right at every size\n", rank, kinds[k]);
    }
    fflush(stdout);
    static char theirs[2][MAX_SIZES][WHY];
    if (rank == 0)
        PMPI_Recv(theirs, (int)sizeof theirs, MPI_CHAR, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        PMPI_Send(why, (int)sizeof why, MPI_CHAR, 0, 9, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%12s %12s %10s %14s\n", "#bytes", "#repetitions", "#warm-up", "t[usec]");
        for (int s = 0; s < nsizes; s++) printf("%12ld %12ld %10ld %14.3f\n", sizes[s], reps[s], warm[s], t_us[s]);
        FILE *f = json ? fopen(json, "w") : NULL;
        if (f) {
            int right[2] = {1, 1};
            fprintf(f, "{\"ranks\": %d, \"rows\": [", size);
            for (int s = 0; s < nsizes; s++) {
                fprintf(f, "%s{\"bytes\": %ld, \"repetitions\": %ld, \"warmup\": %ld, \"t_usec\": %.6f", s ? ", " : "",
                        sizes[s], reps[s], warm[s], isfinite(t_us[s]) ? t_us[s] : -1.0);
                for (int k = 0; k < 2; k++) {
                    const char *w = why[k][s][0] ? why[k][s] : theirs[k][s];
                    int r = why[k][s][0] ? 0 : 1;
                    right[k] &= !w[0];
                    fprintf(f, ", \"%s\": \"", kinds[k]);
                    if (w[0]) fprintf(f, "rank %d: ", r);
                    for (const char *c = w; *c; c++) fputc(*c == '"' || *c == '\\' ? '\'' : *c, f);
                    fputc('"', f);
                }
                fputc('}', f);
            }
            fprintf(f, "], \"payload_right\": %s, \"timing_right\": %s}\n", right[0] ? "true" : "false",
                    right[1] ? "true" : "false");
            fclose(f);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
