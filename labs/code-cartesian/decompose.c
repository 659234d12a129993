/* The Cartesian decomposition lab: the Poisson solver's process grid and block split.

   The solver (src/poisson/poisson.c) calls these two functions (declared in halo.h):

   topology(comm, dims, &cart, coords, nbr)
     dims[0] x dims[1] is the process grid; an entry 0 means "choose it for me" (the solver
     passes {0, 0} unless --grid PxQ is given). Fill in the zeros with MPI_Dims_create, make
     *cart a non-periodic two-dimensional Cartesian communicator over comm (MPI_Cart_create,
     ranks not reordered), then give this rank's coordinates in it (MPI_Cart_coords) and its
     four neighbours (MPI_Cart_shift): nbr[FACE_XLO] and nbr[FACE_XHI] one step down and up
     along dimension 0, nbr[FACE_YLO] and nbr[FACE_YHI] along dimension 1, MPI_PROC_NULL where
     there is none.

   split(n, p, c, &len, &start)
     the block of n points that part c of p gets: as even as possible, the first n % p parts
     one point more; *start is its first point's global index (0-based).

   The code below computes ranks by hand and only works on a line of processes (a grid P x 1)
   with points that divide evenly. Replace it. Change only these two functions. */
#include "halo.h"

void topology(MPI_Comm comm, int dims[2], MPI_Comm *cart, int coords[2], int nbr[N_FACES])
{
    /* BEGIN SOLUTION */
    int size, rank, periods[2] = {0, 0};
    MPI_Comm_size(comm, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(comm, 2, dims, periods, 0, cart);
    MPI_Comm_rank(*cart, &rank);
    MPI_Cart_coords(*cart, rank, 2, coords);
    MPI_Cart_shift(*cart, 0, 1, &nbr[FACE_XLO], &nbr[FACE_XHI]);
    MPI_Cart_shift(*cart, 1, 1, &nbr[FACE_YLO], &nbr[FACE_YHI]);
    /* END SOLUTION */
    /* BEGIN STARTER
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    dims[0] = size;
    dims[1] = 1;
    MPI_Comm_dup(comm, cart);
    coords[0] = rank;
    coords[1] = 0;
    nbr[FACE_XLO] = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    nbr[FACE_XHI] = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    nbr[FACE_YLO] = MPI_PROC_NULL;
    nbr[FACE_YHI] = MPI_PROC_NULL;
    END STARTER */
}

void split(long long n, int p, int c, long long *len, long long *start)
{
    /* BEGIN SOLUTION */
    long long base = n / p, rem = n % p;
    *len = base + (c < rem);
    *start = c * base + (c < rem ? c : rem);
    /* END SOLUTION */
    /* BEGIN STARTER
    *len = n / p;
    *start = c * (n / p);
    END STARTER */
}
