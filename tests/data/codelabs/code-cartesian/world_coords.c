/* mistake: a wrong neighbour: neighbours computed by hand from the world rank, as if the grid were a line
   feedback: neighbour along . \(nbr\[FACE_.*\]\) is rank \d, expected */
#include "halo.h"

void topology(MPI_Comm comm, int dims[2], MPI_Comm *cart, int coords[2], int nbr[N_FACES])
{
    int size, rank, periods[2] = {0, 0};
    MPI_Comm_size(comm, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(comm, 2, dims, periods, 0, cart);
    MPI_Comm_rank(*cart, &rank);
    MPI_Cart_coords(*cart, rank, 2, coords);
    nbr[FACE_XLO] = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    nbr[FACE_XHI] = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    nbr[FACE_YLO] = MPI_PROC_NULL;
    nbr[FACE_YHI] = MPI_PROC_NULL;
}

void split(long long n, int p, int c, long long *len, long long *start)
{
    long long base = n / p, rem = n % p;
    *len = base + (c < rem);
    *start = c * base + (c < rem ? c : rem);
}
