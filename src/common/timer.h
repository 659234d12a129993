/* Wall-clock timer shared by the kernels: seconds as a double, from MPI_Wtime (monotonic in
   Open MPI). One definition so every kernel times the same way. */
#ifndef HPCLAB_TIMER_H
#define HPCLAB_TIMER_H
#include <mpi.h>

static inline double hpc_now(void) { return MPI_Wtime(); }

#endif
