/* The Cartesian lab's report: calls the student's topology() and split() (decompose.c) the way
   the Poisson solver does and writes what every rank got as JSON, for the grader to compare
   with what MPI's Cartesian functions should give.

   usage: cartesian_report --dims PxQ (0x0: let topology choose) --points N[,N...] --json FILE */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo.h"

#define MAX_POINTS 8

static void peer(FILE *f, int r) { r == MPI_PROC_NULL ? fprintf(f, "null") : fprintf(f, "%d", r); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world, size, dims[2] = {0, 0}, npoints = 0;
    long long points[MAX_POINTS];
    const char *json = NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dims"))
            sscanf(argv[i + 1], "%dx%d", &dims[0], &dims[1]);
        else if (!strcmp(argv[i], "--points"))
            for (char *tok = strtok(argv[i + 1], ","); tok && npoints < MAX_POINTS; tok = strtok(NULL, ","))
                points[npoints++] = atoll(tok);
        else if (!strcmp(argv[i], "--json"))
            json = argv[i + 1];
    }
    int asked[2] = {dims[0], dims[1]};
    MPI_Comm cart = MPI_COMM_NULL;
    int coords[2] = {-1, -1}, nbr[N_FACES] = {-1, -1, -1, -1};
    topology(MPI_COMM_WORLD, dims, &cart, coords, nbr);

    /* what the communicator it made is */
    int topo = MPI_UNDEFINED, crank = -1, cdims[2] = {0, 0}, periods[2] = {-1, -1}, ccoords[2] = {-1, -1};
    if (cart != MPI_COMM_NULL) {
        MPI_Topo_test(cart, &topo);
        MPI_Comm_rank(cart, &crank);
        if (topo == MPI_CART) {
            int nd = 0;
            MPI_Cartdim_get(cart, &nd);
            if (nd == 2) MPI_Cart_get(cart, 2, cdims, periods, ccoords);
        }
    }
    char line[2048];
    int n = snprintf(line, sizeof line, "{\"rank\": %d, \"asked\": [%d, %d], \"dims\": [%d, %d], \"cart_rank\": %d, "
                     "\"topology\": \"%s\", \"cart_dims\": [%d, %d], \"periods\": [%d, %d], \"cart_coords\": [%d, %d], "
                     "\"coords\": [%d, %d], \"blocks\": [", world, asked[0], asked[1], dims[0], dims[1], crank,
                     cart == MPI_COMM_NULL ? "null" : topo == MPI_CART ? "cart" : topo == MPI_GRAPH ? "graph" : "none",
                     cdims[0], cdims[1], periods[0], periods[1], ccoords[0], ccoords[1], coords[0], coords[1]);
    for (int k = 0; k < npoints; k++) {
        long long xl = -1, xs = -1, yl = -1, ys = -1;
        if (dims[0] > 0 && dims[1] > 0 && coords[0] >= 0 && coords[1] >= 0) {
            split(points[k], dims[0], coords[0], &xl, &xs);
            split(points[k], dims[1], coords[1], &yl, &ys);
        }
        n += snprintf(line + n, sizeof line - (size_t)n, "%s{\"n\": %lld, \"x\": [%lld, %lld], \"y\": [%lld, %lld]}",
                      k ? ", " : "", points[k], xl, xs, yl, ys);
    }
    n += snprintf(line + n, sizeof line - (size_t)n, "], \"nbr\": [");
    line[sizeof line - 1] = '\0';

    /* rank 0 writes every rank's line: the neighbours go through a file stream for MPI_PROC_NULL */
    char nb[128];
    FILE *mem = fmemopen(nb, sizeof nb, "w");
    for (int k = 0; k < N_FACES; k++) {
        if (k) fprintf(mem, ", ");
        peer(mem, nbr[k]);
    }
    fprintf(mem, "]}");
    fclose(mem);
    strncat(line, nb, sizeof line - strlen(line) - 1);
    char *all = world == 0 ? malloc((size_t)size * sizeof line) : NULL;
    MPI_Gather(line, (int)sizeof line, MPI_CHAR, all, (int)sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (world == 0) {
        FILE *f = json ? fopen(json, "w") : stdout;
        fprintf(f, "{\"size\": %d, \"ranks\": [\n", size);
        for (int r = 0; r < size; r++) fprintf(f, "%s%s\n", all + (size_t)r * sizeof line, r + 1 < size ? "," : "");
        fprintf(f, "]}\n");
        if (json) fclose(f);
        free(all);
    }
    printf("rank %d: coords %d,%d\n", world, coords[0], coords[1]);
    if (cart != MPI_COMM_NULL && cart != MPI_COMM_WORLD) MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
