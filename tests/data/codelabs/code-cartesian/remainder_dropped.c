/* mistake: points that do not divide evenly: the remainder n % p is dropped
   feedback: block along . of 1[01] points is .* expected */
#include "halo.h"

void topology(MPI_Comm comm, int dims[2], MPI_Comm *cart, int coords[2], int nbr[N_FACES])
{
    int size, rank, periods[2] = {0, 0};
    MPI_Comm_size(comm, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(comm, 2, dims, periods, 0, cart);
    MPI_Comm_rank(*cart, &rank);
    MPI_Cart_coords(*cart, rank, 2, coords);
    MPI_Cart_shift(*cart, 0, 1, &nbr[FACE_XLO], &nbr[FACE_XHI]);
    MPI_Cart_shift(*cart, 1, 1, &nbr[FACE_YLO], &nbr[FACE_YHI]);
}

void split(long long n, int p, int c, long long *len, long long *start)
{
    *len = n / p;
    *start = c * (n / p);
}
