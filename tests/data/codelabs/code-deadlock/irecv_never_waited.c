/* mistake: a missing wait: the MPI_Irecv is never completed before theirs[] is read
   feedback: never completed: 1 from MPI_Irecv at swap\.c:8 */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Request req;
    MPI_Irecv(theirs, count, MPI_DOUBLE, partner, 0, comm, &req);
    MPI_Send(mine, count, MPI_DOUBLE, partner, 0, comm);
}
