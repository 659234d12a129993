/* The deadlock lab: your swap. Send mine[0..count) to partner and receive partner's count
   doubles into theirs[0..count). Both ranks of a pair call swap() at the same time, each with
   the other as partner; when swap returns, theirs[] must hold the partner's data and mine[]
   must be free to be refilled (main.c refills it for the next round).

   The code below works for small messages and hangs for large ones. Find the size at which it
   hangs on this machine (the lab's notebook, part 1), then fix it (part 2) so that it works for
   any size under every MPI library: with MPI_Sendrecv, or with MPI_Irecv, MPI_Isend and
   MPI_Waitall. Change only this function. */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    /* BEGIN SOLUTION */
    MPI_Sendrecv(mine, count, MPI_DOUBLE, partner, 0, theirs, count, MPI_DOUBLE, partner, 0, comm,
                 MPI_STATUS_IGNORE);
    /* END SOLUTION */
    /* BEGIN STARTER
    MPI_Send(mine, count, MPI_DOUBLE, partner, 0, comm);
    MPI_Recv(theirs, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
    END STARTER */
}
