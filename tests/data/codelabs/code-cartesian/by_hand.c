/* mistake: not rewritten: ranks computed by hand on a line of processes, and the remainder of
   the points dropped (the lab's starting point)
   feedback: not Cartesian */
#include "halo.h"

void topology(MPI_Comm comm, int dims[2], MPI_Comm *cart, int coords[2], int nbr[N_FACES])
{
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
}

void split(long long n, int p, int c, long long *len, long long *start)
{
    *len = n / p;
    *start = c * (n / p);
}
