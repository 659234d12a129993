/* mistake: the receives are waited for before any send is posted: every rank waits for data
   nobody has sent yet
   feedback: waits in MPI_Waitall */
#include "halo.h"

void halo_nonblocking(const halo_faces *h)
{
    MPI_Request req[2 * N_FACES];
    for (int k = 0; k < N_FACES; k++)
        MPI_Irecv(h->recv[k], h->count[k], MPI_DOUBLE, h->peer[k], k % 2 == 0 ? TAG_UP : TAG_DOWN, h->comm, &req[k]);
    MPI_Waitall(N_FACES, req, MPI_STATUSES_IGNORE);
    for (int k = 0; k < N_FACES; k++)
        MPI_Isend(h->send[k], h->count[k], MPI_DOUBLE, h->peer[k], k % 2 == 0 ? TAG_DOWN : TAG_UP, h->comm,
                  &req[N_FACES + k]);
    MPI_Waitall(N_FACES, req + N_FACES, MPI_STATUSES_IGNORE);
}
