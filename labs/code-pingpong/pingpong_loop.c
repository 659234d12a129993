/* The ping-pong lab: the timed loop of a ping-pong, as IMB-MPI1's PingPong times it.

   The driver (main.c) calls pingpong() on ranks 0 and 1 once per message size, with two
   buffers of `bytes` bytes each: sbuf holds this rank's message, rbuf receives the partner's.
   A round trip is one message from the rank with the lower number (it sends first) to the
   other and one back: each rank sends its own sbuf and receives into its rbuf. pingpong()
   makes `warmup` untimed round trips, then MPI_Barrier, then times `reps` round trips with
   MPI_Wtime (one call just after the barrier, one after the last round trip) and returns t,
   the time of one message in seconds: half a round trip, as IMB reports it. The driver checks
   what arrived and watches the calls you make (warm-up, barrier, timer, counts). */
#include <mpi.h>

double pingpong(void *sbuf, void *rbuf, int bytes, int reps, int warmup, int partner, MPI_Comm comm)
{
    double t = 0.0;
    /* BEGIN SOLUTION */
    int rank;
    MPI_Comm_rank(comm, &rank);
    const int first = rank < partner;   /* the lower rank sends first */
    for (int r = -warmup; r < reps; r++) {
        if (r == 0) {
            /* the ranks start the timed round trips together, after the warm-up */
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
    t = (MPI_Wtime() - t) / (2.0 * reps);
    /* END SOLUTION */
    /* BEGIN STARTER
    (void)sbuf, (void)rbuf, (void)bytes, (void)reps, (void)warmup, (void)partner, (void)comm;
    END STARTER */
    return t;
}
