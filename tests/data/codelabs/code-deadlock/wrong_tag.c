/* mistake: a wrong tag: the receive waits for tag 2, the partner sends with tag 1
   feedback: tags do not match */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Sendrecv(mine, count, MPI_DOUBLE, partner, 1, theirs, count, MPI_DOUBLE, partner, 2, comm,
                 MPI_STATUS_IGNORE);
}
