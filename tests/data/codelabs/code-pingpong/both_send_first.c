/* mistake: both ranks send first: a deadlock once a message passes the eager limit
   feedback: every rank is in a blocking send.*both ranks send first */
#include <mpi.h>

double pingpong(void *sbuf, void *rbuf, int bytes, int reps, int warmup, int partner, MPI_Comm comm)
{
    double t = 0.0;
    for (int r = -warmup; r < reps; r++) {
        if (r == 0) {
            MPI_Barrier(comm);
            t = MPI_Wtime();
        }
        MPI_Send(sbuf, bytes, MPI_BYTE, partner, 0, comm);
        MPI_Recv(rbuf, bytes, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE);
    }
    return (MPI_Wtime() - t) / (2.0 * reps);
}
