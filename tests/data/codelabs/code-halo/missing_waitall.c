/* mistake: a missing MPI_Waitall: the receives and sends are posted and the function returns
   feedback: never completed */
#include "halo.h"

void halo_nonblocking(const halo_faces *h)
{
    MPI_Request req[2 * N_FACES];
    for (int k = 0; k < N_FACES; k++)
        MPI_Irecv(h->recv[k], h->count[k], MPI_DOUBLE, h->peer[k], k % 2 == 0 ? TAG_UP : TAG_DOWN, h->comm, &req[k]);
    for (int k = 0; k < N_FACES; k++)
        MPI_Isend(h->send[k], h->count[k], MPI_DOUBLE, h->peer[k], k % 2 == 0 ? TAG_DOWN : TAG_UP, h->comm,
                  &req[N_FACES + k]);
}
