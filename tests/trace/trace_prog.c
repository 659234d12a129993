/* trace_prog.c - the MPI program tests/trace/test_tracer.py runs under the tracer.
 *
 * Every call it makes has an answer known in advance (peers, tags, sizes), which the test
 * checks against the loaded trace. `trace_prog crash` flushes the trace, makes one more call
 * and leaves with _exit() without MPI_Finalize, like a crashed run. `trace_prog more` runs a
 * second program (more_calls below) for the calls the first does not make: Init_thread,
 * Comm_dup, Testall/Testany/Testsome, Waitany/Waitsome, Sendrecv_replace, and enough calls to
 * fill a small tracer buffer (MPITRACE_BUFFER_RECORDS) several times. `trace_prog cpu MS`
 * sleeps and then spins between barriers (cpu_bursts below), for the CPU times; `trace_prog
 * sync MS` makes synchronous sends to a late receiver (sync_sends).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void mpitrace_begin(const char *name) __attribute__((weak));
void mpitrace_end(const char *name) __attribute__((weak));
void mpitrace_flush(void) __attribute__((weak));

static void begin(const char *n) { if (mpitrace_begin) mpitrace_begin(n); }
static void end(const char *n) { if (mpitrace_end) mpitrace_end(n); }

#define MORE_LOOP 100 /* Sendrecvs at the end of more_calls: 2 records each, many buffers of 64 */

/* Post a receive from the left and a send to the right with one tag on `c` (8 ints each way). */
static void post_pair(MPI_Comm c, int left, int right, int tag, int *in, int *out, MPI_Request q[2])
{
    MPI_Irecv(in, 8, MPI_INT, left, tag, c, &q[0]);
    MPI_Isend(out, 8, MPI_INT, right, tag, c, &q[1]);
}

static int more_calls(int *argc, char ***argv)
{
    int provided = -1;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (r == 0)
        printf("provided=%d\n", provided);
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    int in[8], out[8] = {0};
    MPI_Request q[2];
    MPI_Status sts[2];
    int flag, idx, outcount, ids[2], done;

    /* requests 0, 1 on a duplicate of COMM_WORLD, polled with Testall */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    post_pair(dup, left, right, 10, in, out, q);
    do
        MPI_Testall(2, q, &flag, sts);
    while (!flag);

    /* requests 2, 3: two Waitany, one request each */
    post_pair(MPI_COMM_WORLD, left, right, 11, in, out, q);
    for (int k = 0; k < 2; k++)
        MPI_Waitany(2, q, &idx, &sts[0]);

    /* requests 4, 5: Testany until both are done */
    post_pair(dup, left, right, 12, in, out, q);
    for (done = 0; done < 2;) {
        MPI_Testany(2, q, &idx, &flag, MPI_STATUS_IGNORE);
        done += flag && idx != MPI_UNDEFINED;
    }

    /* requests 6, 7: Waitsome; requests 8, 9: Testsome */
    post_pair(MPI_COMM_WORLD, left, right, 13, in, out, q);
    for (done = 0; done < 2; done += outcount)
        MPI_Waitsome(2, q, &outcount, ids, sts);
    post_pair(dup, left, right, 14, in, out, q);
    for (done = 0; done < 2; done += outcount)
        MPI_Testsome(2, q, &outcount, ids, MPI_STATUSES_IGNORE);

    /* 5 doubles to the right, replaced by the left neighbour's */
    double d[5] = {0};
    MPI_Sendrecv_replace(d, 5, MPI_DOUBLE, right, 15, left, 15, dup, MPI_STATUS_IGNORE);

    for (int k = 0; k < MORE_LOOP; k++)
        MPI_Sendrecv(out, 1, MPI_INT, right, 16, in, 1, MPI_INT, left, 16, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* `trace_prog cpu MS`: between barriers, each rank first sleeps MS milliseconds (a burst of
 * wall time in which it does not run), then spins MS milliseconds (a burst in which it runs
 * all the time, unless the machine switches it out). */
static int cpu_bursts(int *argc, char ***argv, int ms)
{
    MPI_Init(argc, argv);
    MPI_Barrier(MPI_COMM_WORLD);
    struct timespec nap = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&nap, &nap) != 0)
        ;
    MPI_Barrier(MPI_COMM_WORLD);
    volatile double x = 0;
    for (double t0 = mono(); mono() - t0 < 1e-3 * ms;)
        x += 1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return x < 0;
}

/* `trace_prog sync MS` on 2 ranks: rank 0 sends 8 B to rank 1 with MPI_Ssend, then with
 * MPI_Issend + MPI_Wait; rank 1 sleeps MS milliseconds before each receive, so both sends wait
 * for their receiver although the message is small. */
static int sync_sends(int *argc, char ***argv, int ms)
{
    MPI_Init(argc, argv);
    int r, x = 7;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    struct timespec nap = {ms / 1000, (long)(ms % 1000) * 1000000L};
    for (int k = 0; k < 2; k++) {
        if (r == 0 && k == 0) {
            MPI_Ssend(&x, 2, MPI_INT, 1, 20, MPI_COMM_WORLD);
        } else if (r == 0) {
            MPI_Request q;
            MPI_Issend(&x, 2, MPI_INT, 1, 21, MPI_COMM_WORLD, &q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        } else if (r == 1) {
            struct timespec left = nap;
            while (nanosleep(&left, &left) != 0)
                ;
            int y[2];
            MPI_Recv(y, 2, MPI_INT, 0, 20 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "sync") == 0)
        return sync_sends(&argc, &argv, atoi(argv[2]));
    if (argc > 1 && strcmp(argv[1], "more") == 0)
        return more_calls(&argc, &argv);
    if (argc > 2 && strcmp(argv[1], "cpu") == 0)
        return cpu_bursts(&argc, &argv, atoi(argv[2]));
    MPI_Init(&argc, &argv);
    int crash = argc > 1 && strcmp(argv[1], "crash") == 0;
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    int ibuf[100] = {0}, ibuf2[100];
    double d[20] = {0}, d2[20], d3[20];

    /* 1. ring with blocking calls; even ranks send first (400 B: eager on every transport) */
    begin("setup");
    if (r % 2 == 0) {
        MPI_Send(ibuf, 100, MPI_INT, right, 1, MPI_COMM_WORLD);
        MPI_Recv(ibuf2, 100, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(ibuf2, 100, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(ibuf, 100, MPI_INT, right, 1, MPI_COMM_WORLD);
    }
    end("setup");

    /* 2. non-blocking exchange; the second receive is posted for any source and larger than
     * the message, and the array holds a REQUEST_NULL */
    begin("exchange");
    MPI_Request q[5];
    MPI_Irecv(d2, 10, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(d3, 20, MPI_DOUBLE, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &q[1]);
    MPI_Isend(d, 10, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &q[2]);
    MPI_Isend(d, 5, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &q[3]);
    q[4] = MPI_REQUEST_NULL;
    begin("inner");
    end("inner");
    MPI_Waitall(5, q, MPI_STATUSES_IGNORE);
    end("exchange");

    /* 3. Sendrecv receiving from any source with any tag */
    MPI_Status st;
    MPI_Sendrecv(ibuf, 3, MPI_INT, right, 4, ibuf2, 16, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                 MPI_COMM_WORLD, &st);

    if (crash) {
        mpitrace_flush();
        MPI_Barrier(MPI_COMM_WORLD); /* recorded, never flushed: lost like in a crash */
        _exit(0);
    }

    /* 4. MPI_PROC_NULL both ways, and a Wait on MPI_REQUEST_NULL */
    MPI_Send(ibuf, 7, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD);
    MPI_Recv(ibuf2, 7, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request rn = MPI_REQUEST_NULL;
    MPI_Wait(&rn, MPI_STATUS_IGNORE);

    /* 5. a communicator with the ranks reversed, and a ring on a Cartesian one made from it:
     * communicator ranks differ from world ranks, so peers must be translated */
    MPI_Comm rev, cart;
    MPI_Comm_split(MPI_COMM_WORLD, 0, p - r, &rev);
    int dims[1] = {p}, periods[1] = {1};
    MPI_Cart_create(rev, 1, dims, periods, 0, &cart);
    int src, dst;
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    MPI_Request qc;
    MPI_Isend(ibuf, 2, MPI_INT, dst, 6, cart, &qc);
    MPI_Recv(ibuf2, 2, MPI_INT, src, 6, cart, MPI_STATUS_IGNORE);
    int flag = 0;
    while (!flag)
        MPI_Test(&qc, &flag, MPI_STATUS_IGNORE);

    /* 6. collectives: roots given as communicator ranks */
    double x = r, sum;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(ibuf, 4, MPI_INT, 0, rev);        /* rev rank 0 = world rank p-1 */
    MPI_Reduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, 1, cart); /* cart rank 1 = world rank p-2 */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&cart);
    MPI_Comm_free(&rev);
    MPI_Finalize();
    return 0;
}
