/* mistake: the deadlock left in: both ranks send first, then receive
   feedback: both ranks send first */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Send(mine, count, MPI_DOUBLE, partner, 0, comm);
    MPI_Recv(theirs, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
}
