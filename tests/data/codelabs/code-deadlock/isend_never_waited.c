/* mistake: a request leaked: the MPI_Isend is never waited for, so mine[] is reused (refilled by
   main) before its send completed
   feedback: never completed: 1 from MPI_Isend at swap\.c:9 */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Request req;
    MPI_Isend(mine, count, MPI_DOUBLE, partner, 0, comm, &req);
    MPI_Recv(theirs, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
}
