/* The halo exchange lab: your non-blocking halo exchange for the Poisson solver.

   The solver (src/poisson/poisson.c) calls halo_nonblocking() twice per iteration with the four
   faces of this rank's block (halo.h):
     h->peer[k]   the neighbour across face k (FACE_XLO, FACE_XHI, FACE_YLO, FACE_YHI), or
                  MPI_PROC_NULL at the domain's edge (a send or receive to it does nothing);
     h->send[k]   h->count[k] doubles of this rank's own points next to face k, for peer[k];
     h->recv[k]   where peer[k]'s h->count[k] doubles go (this rank's halo along face k).
   A message to the upper neighbour (faces XHI, YHI) travels up: tag TAG_UP; to the lower one
   (XLO, YLO) TAG_DOWN. So what arrives from the lower neighbour carries TAG_UP.

   When the function returns, every recv[k] must hold the neighbour's points and every send[k]
   must be free to be overwritten (the solver packs the next faces into it).

   The code below is the 2014 code's blocking order: it gives the right answer, but above the
   eager limit every rank waits for the one above it (a chain). Rewrite it with MPI_Irecv,
   MPI_Isend and one MPI_Waitall, so that no rank waits for another's order of calls. Change
   only this function; keep its name. */
#include "halo.h"

void halo_nonblocking(const halo_faces *h)
{
    /* BEGIN SOLUTION */
    MPI_Request req[2 * N_FACES];
    for (int k = 0; k < N_FACES; k++) {
        int from_lower = (k == FACE_XLO || k == FACE_YLO);
        MPI_Irecv(h->recv[k], h->count[k], MPI_DOUBLE, h->peer[k], from_lower ? TAG_UP : TAG_DOWN, h->comm,
                  &req[k]);
    }
    for (int k = 0; k < N_FACES; k++) {
        int to_lower = (k == FACE_XLO || k == FACE_YLO);
        MPI_Isend(h->send[k], h->count[k], MPI_DOUBLE, h->peer[k], to_lower ? TAG_DOWN : TAG_UP, h->comm,
                  &req[N_FACES + k]);
    }
    MPI_Waitall(2 * N_FACES, req, MPI_STATUSES_IGNORE);
    /* END SOLUTION */
    /* BEGIN STARTER
    for (int dim = 0; dim < 2; dim++) {
        int lo = 2 * dim, hi = 2 * dim + 1;
        MPI_Send(h->send[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_UP, h->comm);
        MPI_Recv(h->recv[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_UP, h->comm, MPI_STATUS_IGNORE);
        MPI_Send(h->send[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_DOWN, h->comm);
        MPI_Recv(h->recv[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_DOWN, h->comm, MPI_STATUS_IGNORE);
    }
    END STARTER */
}
