/* mistake: the whole round trip timed and returned, not half of it (IMB's t is half)
   feedback: the whole round trip; IMB's t is half of it */
#include <mpi.h>

double pingpong(void *sbuf, void *rbuf, int bytes, int reps, int warmup, int partner, MPI_Comm comm)
{
    int rank;
    double t = 0.0;
    MPI_Comm_rank(comm, &rank);
    const int first = rank < partner;
    for (int r = -warmup; r < reps; r++) {
        if (r == 0) {
            MPI_Barrier(comm);
            t = MPI_Wtime();
        }
        if (first) {
            MPI_Send(sbuf, bytes, MPI_BYTE, partner, 0, comm);
            MPI_Recv(rbuf, bytes, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, bytes, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, bytes, MPI_BYTE, partner, 0, comm);
        }
    }
    return (MPI_Wtime() - t) / reps;
}
