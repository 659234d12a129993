/* mistake: both ranks receive first, then send
   feedback: both ranks receive first */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Recv(theirs, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
    MPI_Send(mine, count, MPI_DOUBLE, partner, 0, comm);
}
