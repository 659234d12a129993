/* The derived datatype lab's driver. Ranks pair up (0 with 1, 2 with 3); each pair swaps
   column 0 of a rows x cols array into the partner's last column, once with your MPI_Type_vector
   (make_column) and once with your manual packing (pack_column, unpack_column), rounds in turn
   (A B A B: a round's two times saw the same machine), after --warmup untimed rounds. Each
   swap is checked; the times are rank 0's, in microseconds, one per round and way. Do not edit:
   the grader builds your column.c with its own copy.

   usage: column --rows R --cols C [--reps N] [--warmup W] [--json FILE]  (2 <= C, R, C <= 9999) */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MPI_Datatype make_column(int rows, int cols);
void pack_column(const double *a, int rows, int cols, int col, double *buf);
void unpack_column(double *a, int rows, int cols, int col, const double *buf);

/* Element (i, j) of rank r's array: says where it came from when it lands in the wrong place. */
static double value(int r, int i, int j) { return r * 1e8 + i * 1e4 + j; }

static void fill(double *a, int rows, int cols, int rank)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) a[(long)i * cols + j] = value(rank, i, j);
}

/* Where a value came from, in words. */
static void origin(char *out, size_t size, double got, int rows, int cols)
{
    snprintf(out, size, "a value no rank had");
    if (got >= 0 && got == floor(got)) {
        long v = (long)got;
        int r = (int)(v / 100000000), i = (int)(v / 10000 % 10000), j = (int)(v % 10000);
        if (r < 64 && i < rows && j < cols) snprintf(out, size, "rank %d's element (%d, %d)", r, i, j);
    }
}

/* What went wrong after a swap, in words ("" when every element is right): the first wrong
   element of the received column (with a hint when the pattern names the mistake), then the
   first element outside it that changed. */
static void check(char *why, size_t size, const double *a, int rows, int cols, int rank, int partner)
{
    char from[160];
    int n = 0;
    why[0] = '\0';
    for (int i = 0; i < rows; i++) {
        double got = a[(long)i * cols + cols - 1], want = value(partner, i, 0);
        if (got == want) continue;
        const char *hint = "";
        if (got == value(rank, i, cols - 1))
            hint = i == 1 && a[cols - 1] == value(partner, 0, 0)
                       ? ": nothing arrived there, though row 0 did (the elements of a column lie cols doubles "
                         "apart: the stride)"
                       : ": nothing arrived there (it still holds this rank's own element)";
        else if (got == value(partner, 0, i))
            hint = ": element (0, i) instead of (i, 0), rows and columns swapped (the column was read along a row)";
        origin(from, sizeof from, got, rows, cols);
        n = snprintf(why, size, "element (%d, %d) of the received column is %s, expected rank %d's element (%d, 0)%s",
                     i, cols - 1, from, partner, i, hint);
        break;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols - 1; j++) {
            double got = a[(long)i * cols + j];
            if (got == value(rank, i, j)) continue;
            origin(from, sizeof from, got, rows, cols);
            snprintf(why + n, size - (size_t)n, "%selement (%d, %d), outside the received column, changed: it holds %s, "
                     "expected its own element (%d, %d)", n ? "; and " : "", i, j, from, i, j);
            return;
        }
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, rows = 0, cols = 0, reps = 21, warmup = 5;
    const char *json = NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows")) rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cols")) cols = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--json")) json = argv[i + 1];
    }
    if (rows < 1 || cols < 2 || rows > 9999 || cols > 9999 || reps < 1 || warmup < 0 || size % 2) {
        if (rank == 0) fprintf(stderr, "column needs --rows 1..9999, --cols 2..9999, --reps >= 1 and an even number of ranks\n");
        MPI_Finalize();
        return 2;
    }
    const int partner = rank ^ 1;
    double *a = malloc((size_t)rows * cols * sizeof(double));
    double *sbuf = malloc((size_t)rows * sizeof(double)), *rbuf = malloc((size_t)rows * sizeof(double));
    double *times[2] = {malloc((size_t)reps * sizeof(double)), malloc((size_t)reps * sizeof(double))};
    char why[2][800] = {"", ""};
    MPI_Datatype column = make_column(rows, cols);
    for (int round = -warmup; round < reps; round++) {
        for (int way = 0; way < 2; way++) {
            fill(a, rows, cols, rank);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (way == 0) {
                MPI_Sendrecv(a, 1, column, partner, 0, a + cols - 1, 1, column, partner, 0, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
            } else {
                pack_column(a, rows, cols, 0, sbuf);
                MPI_Sendrecv(sbuf, rows, MPI_DOUBLE, partner, 1, rbuf, rows, MPI_DOUBLE, partner, 1, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
                unpack_column(a, rows, cols, cols - 1, rbuf);
            }
            double t = (MPI_Wtime() - t0) * 1e6;
            if (round >= 0) times[way][round] = t;
            if (round == -warmup || round == reps - 1) {
                char now[800];
                check(now, sizeof now, a, rows, cols, rank, partner);
                if (now[0] && !why[way][0]) memcpy(why[way], now, sizeof now);
            }
        }
    }
    const char *names[2] = {"MPI_Type_vector", "manual packing"};
    for (int way = 0; way < 2; way++)
        if (why[way][0]) printf("ERROR: rank %d, %s: %s\n", rank, names[way], why[way]);
        else printf("rank %d: %s: every element right\n", rank, names[way]);
    /* rank 0's report: which way was right on every rank, and rank 0's times */
    int ok[2] = {!why[0][0], !why[1][0]}, all[2];
    MPI_Allreduce(ok, all, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0 && json) {
        FILE *f = fopen(json, "w");
        fprintf(f, "{\"rows\": %d, \"cols\": %d, \"reps\": %d, \"warmup\": %d, \"ranks\": %d", rows, cols, reps, warmup, size);
        for (int way = 0; way < 2; way++) {
            fprintf(f, ", \"%s\": {\"right\": %s, \"error\": \"", way ? "packed" : "vector", all[way] ? "true" : "false");
            for (const char *c = why[way]; *c; c++) fputc(*c == '"' ? '\'' : *c, f);
            fprintf(f, "\", \"us\": [");
            for (int k = 0; k < reps; k++) fprintf(f, "%s%.3f", k ? ", " : "", times[way][k]);
            fprintf(f, "]}");
        }
        fprintf(f, "}\n");
        fclose(f);
    }
    if (rank == 0) {
        for (int way = 0; way < 2; way++) {
            qsort(times[way], (size_t)reps, sizeof(double), cmp);
            printf("%-16s median %.2f us over %d rounds (min %.2f)\n", names[way], times[way][reps / 2], reps, times[way][0]);
        }
    }
    if (column != MPI_DATATYPE_NULL) MPI_Type_free(&column);
    free(a);
    free(sbuf);
    free(rbuf);
    free(times[0]);
    free(times[1]);
    MPI_Finalize();
    return 0;
}
