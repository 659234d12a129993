/* mistake: one request variable for all eight calls: each call overwrites the last one's handle,
   so only the last request is waited for and seven leak
   feedback: never completed */
#include "halo.h"

void halo_nonblocking(const halo_faces *h)
{
    MPI_Request req;
    for (int k = 0; k < N_FACES; k++)
        MPI_Irecv(h->recv[k], h->count[k], MPI_DOUBLE, h->peer[k], k % 2 == 0 ? TAG_UP : TAG_DOWN, h->comm, &req);
    for (int k = 0; k < N_FACES; k++)
        MPI_Isend(h->send[k], h->count[k], MPI_DOUBLE, h->peer[k], k % 2 == 0 ? TAG_DOWN : TAG_UP, h->comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
}
