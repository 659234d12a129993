/* mistake: a buffer reused before its send completed: the send's request is freed instead of
   waited for, and main refills mine[] at once
   feedback: freed before it completed */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Request req;
    MPI_Isend(mine, count, MPI_DOUBLE, partner, 0, comm, &req);
    MPI_Request_free(&req);
    MPI_Recv(theirs, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
}
