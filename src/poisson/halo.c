/* The blocking halo exchanges of the Poisson solver (--exchange blocking, sendrecv, naive); the
   non-blocking one is halo_nonblocking.c. Every variant moves the same data, so every variant
   gives bit-identical results; they differ in who waits for whom. */
#include "halo.h"

/* Blocking calls ordered by coordinate parity so that neighbours pair up (an even rank sends
   while its odd neighbour receives): no chain longer than two ranks. */
void halo_blocking(const halo_faces *h)
{
    for (int dim = 0; dim < 2; dim++) {
        int lo = 2 * dim, hi = 2 * dim + 1;
        if (h->coords[dim] % 2 == 0) {
            MPI_Send(h->send[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_UP, h->comm);
            MPI_Recv(h->recv[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_DOWN, h->comm, MPI_STATUS_IGNORE);
            MPI_Send(h->send[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_DOWN, h->comm);
            MPI_Recv(h->recv[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_UP, h->comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(h->recv[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_UP, h->comm, MPI_STATUS_IGNORE);
            MPI_Send(h->send[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_DOWN, h->comm);
            MPI_Recv(h->recv[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_DOWN, h->comm, MPI_STATUS_IGNORE);
            MPI_Send(h->send[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_UP, h->comm);
        }
    }
}

/* One MPI_Sendrecv per direction and dimension: up, then down. */
void halo_sendrecv(const halo_faces *h)
{
    for (int dim = 0; dim < 2; dim++) {
        int lo = 2 * dim, hi = 2 * dim + 1;
        MPI_Sendrecv(h->send[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_UP, h->recv[lo], h->count[lo],
                     MPI_DOUBLE, h->peer[lo], TAG_UP, h->comm, MPI_STATUS_IGNORE);
        MPI_Sendrecv(h->send[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_DOWN, h->recv[hi], h->count[hi],
                     MPI_DOUBLE, h->peer[hi], TAG_DOWN, h->comm, MPI_STATUS_IGNORE);
    }
}

/* The order of the 2014 code (seed 001; Gropp, Lusk and Skjellum, "Using MPI", ch. 4, exchng1),
   per dimension: every rank sends its top face up, then receives from below; then sends its
   bottom face down and receives from above. Above the eager limit a send returns only once its
   receive is posted (rendezvous), and every rank sends first. On a periodic ring that is a
   deadlock. Our grid is not periodic: the last rank of a chain sends to MPI_PROC_NULL (returns
   at once) and goes on to its receive, which releases the rank below it, and so on down the
   chain. So the exchange does not hang; it serialises: rank k's upward send waits for every
   rank above it, and the downward half then unwinds from the bottom: 2 (P - 1) message times
   one after the other on a chain of P ranks, where Isend/Irecv pays about one. A rank late to
   the exchange holds up its whole row or column, not just its neighbours (on a zero-latency
   network that is all the chain costs). Below the eager limit every send returns at once and
   the order costs nothing. */
void halo_naive(const halo_faces *h)
{
    for (int dim = 0; dim < 2; dim++) {
        int lo = 2 * dim, hi = 2 * dim + 1;
        MPI_Send(h->send[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_UP, h->comm);
        MPI_Recv(h->recv[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_UP, h->comm, MPI_STATUS_IGNORE);
        MPI_Send(h->send[lo], h->count[lo], MPI_DOUBLE, h->peer[lo], TAG_DOWN, h->comm);
        MPI_Recv(h->recv[hi], h->count[hi], MPI_DOUBLE, h->peer[hi], TAG_DOWN, h->comm, MPI_STATUS_IGNORE);
    }
}
