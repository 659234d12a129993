/* mistake: the wrong buffer: the partner's data is received into mine[] (the data being sent)
   feedback: changed mine */
#include <mpi.h>
#include <string.h>

void swap(double *mine, double *theirs, int count, int partner, MPI_Comm comm)
{
    MPI_Sendrecv_replace(mine, count, MPI_DOUBLE, partner, 0, partner, 0, comm, MPI_STATUS_IGNORE);
    memcpy(theirs, mine, (size_t)count * sizeof(double));
}
