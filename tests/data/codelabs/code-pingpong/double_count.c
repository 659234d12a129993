/* mistake: a wrong count: bytes / 8 doubles, which drops the last bytes of a size that is no multiple of 8
   feedback: MPI_Send of count 0 x MPI_DOUBLE \(8 bytes each\) = 0 bytes, expected 1 bytes */
#include <mpi.h>

double pingpong(void *sbuf, void *rbuf, int bytes, int reps, int warmup, int partner, MPI_Comm comm)
{
    int rank;
    double t = 0.0;
    MPI_Comm_rank(comm, &rank);
    const int first = rank < partner;
    const int count = bytes / (int)sizeof(double);
    for (int r = -warmup; r < reps; r++) {
        if (r == 0) {
            MPI_Barrier(comm);
            t = MPI_Wtime();
        }
        if (first) {
            MPI_Send(sbuf, count, MPI_DOUBLE, partner, 0, comm);
            MPI_Recv(rbuf, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, count, MPI_DOUBLE, partner, 0, comm, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, count, MPI_DOUBLE, partner, 0, comm);
        }
    }
    return (MPI_Wtime() - t) / (2.0 * reps);
}
