/* mistake: no warm-up: the timed loop starts with the first message
   feedback: no warm-up: the timer starts before the first message */
#include <mpi.h>

double pingpong(void *sbuf, void *rbuf, int bytes, int reps, int warmup, int partner, MPI_Comm comm)
{
    int rank;
    double t = 0.0;
    MPI_Comm_rank(comm, &rank);
    const int first = rank < partner;
    (void)warmup;
    MPI_Barrier(comm);
    t = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
        if (first) {
            MPI_Send(sbuf, bytes, MPI_BYTE, partner, 0, comm);
            MPI_Recv(rbuf, bytes, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, bytes, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, bytes, MPI_BYTE, partner, 0, comm);
        }
    }
    return (MPI_Wtime() - t) / (2.0 * reps);
}
