/* The deadlock lab's driver. Ranks pair up (0 with 1, 2 with 3): each pair swaps a buffer of
   --bytes bytes (doubles), --rounds times, through your swap() in swap.c, and this file checks
   what arrived. Do not edit it: the grader builds your swap.c with its own copy.

   usage: swap --bytes N [--rounds R]      N a multiple of 8 (0 allowed), R >= 1 (default 3) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

/* Yours, in swap.c: send mine[0..count) to partner, receive partner's into theirs[0..count). */
void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm);

/* What rank r sends in round k at index i: exact in a double, different for every rank,
   round and index (below a million), so a wrong piece of data says where it came from. */
static double value(int rank, int round, long i) { return rank * 1e9 + round * 1e6 + (double)(i % 1000000); }

#define FILL (-1.0) /* theirs[] before each swap: seen afterwards, nothing arrived there */

static void fail(int rank, int round, const char *what)
{
    printf("ERROR: rank %d, round %d: %s\n", rank, round, what);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* Where the first wrong value of theirs[] came from, in words. */
static void explain(char *out, size_t size, const double *theirs, long count, int rank, int partner, int round)
{
    for (long i = 0; i < count; i++) {
        double got = theirs[i], want = value(partner, round, i);
        if (got == want) continue;
        const char *why = "not a value any rank sent";
        if (got == FILL)
            why = "nothing arrived there (it still holds the fill value): the receive had not completed when swap returned, or it went to another buffer or was shorter";
        else if (got == value(rank, round, i))
            why = "your own value: this rank received its own message, or copied mine into theirs";
        else if (round > 0 && got == value(partner, round - 1, i))
            why = "your partner's value of the previous round: the receive did not happen this round";
        else if (got == value(partner, round + 1, i))
            why = "your partner's value of the next round: the buffer was refilled before the send had finished";
        else if (i > 0 && got == value(partner, round, i - 1))
            why = "your partner's value for the index before: the data arrived shifted";
        snprintf(out, size, "theirs[%ld] = %.17g, expected %.17g (rank %d's value, round %d): %s", i, got, want,
                 partner, round, why);
        return;
    }
    out[0] = '\0';
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = -1;
    int rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = atol(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            if (rank == 0) fprintf(stderr, "usage: swap --bytes N [--rounds R]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (bytes < 0 || bytes % 8 || bytes / 8 > 1 << 28 || rounds < 1 || size % 2) {
        if (rank == 0)
            fprintf(stderr, "swap needs --bytes N (a multiple of 8, up to 2 GiB), --rounds R >= 1 and an even "
                            "number of ranks (got %ld bytes, %d rounds, %d ranks)\n", bytes, rounds, size);
        MPI_Finalize();
        return 2;
    }
    const int count = (int)(bytes / 8), partner = rank ^ 1;
    double *mine = malloc((size_t)count * sizeof(double) + 8), *theirs = malloc((size_t)count * sizeof(double) + 8);
    double *copy = malloc((size_t)count * sizeof(double) + 8);
    if (!mine || !theirs || !copy) fail(rank, 0, "could not allocate the buffers");
    char why[512];
    for (int round = 0; round < rounds; round++) {
        for (long i = 0; i < count; i++) {
            mine[i] = copy[i] = value(rank, round, i);
            theirs[i] = FILL;
        }
        swap(mine, theirs, count, partner, MPI_COMM_WORLD);
        if (ledger_pending() > 0) {
            char line[1024];
            ledger_describe(line, sizeof line);
            snprintf(why, sizeof why, "swap returned with %s their buffers may still be in use when main refills "
                     "them for the next round (complete every request with MPI_Wait or MPI_Waitall before returning)", line);
            fail(rank, round, why);
        }
        if (memcmp(mine, copy, (size_t)count * sizeof(double))) fail(rank, round, "swap changed mine[], the data it sends");
        explain(why, sizeof why, theirs, count, rank, partner, round);
        if (why[0]) fail(rank, round, why);
    }
    printf("rank %d: swapped %ld bytes with rank %d, %d rounds: every value right\n", rank, bytes, partner, rounds);
    free(mine);
    free(theirs);
    free(copy);
    MPI_Finalize();
    return 0;
}
