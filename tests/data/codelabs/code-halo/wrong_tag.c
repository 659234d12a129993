/* mistake: a wrong tag: every receive expects TAG_DOWN, so what travels up is never received
   feedback: MPI_Waitall .*tag */
#include "halo.h"

void halo_nonblocking(const halo_faces *h)
{
    MPI_Request req[2 * N_FACES];
    for (int k = 0; k < N_FACES; k++)
        MPI_Irecv(h->recv[k], h->count[k], MPI_DOUBLE, h->peer[k], TAG_DOWN, h->comm, &req[k]);
    for (int k = 0; k < N_FACES; k++)
        MPI_Isend(h->send[k], h->count[k], MPI_DOUBLE, h->peer[k], k % 2 == 0 ? TAG_DOWN : TAG_UP, h->comm,
                  &req[N_FACES + k]);
    MPI_Waitall(2 * N_FACES, req, MPI_STATUSES_IGNORE);
}
