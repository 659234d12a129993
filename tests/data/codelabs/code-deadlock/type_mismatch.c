/* mistake: a type mismatch: doubles sent, floats received (the receive buffer is half the message)
   feedback: type or count mismatch */
#include <mpi.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Sendrecv(mine, count, MPI_DOUBLE, partner, 0, theirs, count, MPI_FLOAT, partner, 0, comm,
                 MPI_STATUS_IGNORE);
}
