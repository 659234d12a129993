/* mistake: an exchange instead of a ping-pong: MPI_Sendrecv moves both messages at once
   feedback: calls MPI_Sendrecv: both directions at once is an exchange */
#include <mpi.h>

double pingpong(void *sbuf, void *rbuf, int bytes, int reps, int warmup, int partner, MPI_Comm comm)
{
    double t = 0.0;
    for (int r = -warmup; r < reps; r++) {
        if (r == 0) {
            MPI_Barrier(comm);
            t = MPI_Wtime();
        }
        MPI_Sendrecv(sbuf, bytes, MPI_BYTE, partner, 0, rbuf, bytes, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE);
    }
    return (MPI_Wtime() - t) / (2.0 * reps);
}
