/* The Poisson solver's halo exchange and decomposition, as poisson.c calls them. Each exchange
   variant is one function and the non-blocking one a file of its own (halo_nonblocking.c), and
   the process grid and the block split live in decompose.c: a code lab builds the solver with a
   student's file in place of one of them (labs/code-halo, labs/code-cartesian) and compares the
   residuals with these. */
#ifndef POISSON_HALO_H
#define POISSON_HALO_H

#include <mpi.h>

/* Face k of a rank's block: the lower and upper side along x (rows), then along y (columns). */
enum { FACE_XLO, FACE_XHI, FACE_YLO, FACE_YHI, N_FACES };

/* Tags name the direction a message travels: towards lower coordinates, or towards higher. */
enum { TAG_DOWN = 0, TAG_UP = 1 };

typedef struct {
    MPI_Comm comm;          /* the Cartesian communicator */
    int coords[2];          /* this rank's place in the process grid */
    int peer[N_FACES];      /* the neighbour across face k; MPI_PROC_NULL at the domain boundary */
    int count[N_FACES];     /* doubles along face k */
    double *send[N_FACES];  /* this rank's own points next to face k, packed: what peer[k] needs */
    double *recv[N_FACES];  /* where peer[k]'s points go (this rank's halo along face k, packed) */
} halo_faces;

/* Each variant sends send[k] to peer[k] and receives recv[k] from peer[k] for every face, and
   returns once every recv[k] holds the neighbour's points and every send[k] may be reused.
   A message to the upper neighbour (faces XHI, YHI) carries TAG_UP; to the lower one TAG_DOWN. */
void halo_blocking(const halo_faces *h);    /* MPI_Send/MPI_Recv ordered by coordinate parity */
void halo_sendrecv(const halo_faces *h);    /* MPI_Sendrecv, one per direction and dimension */
void halo_nonblocking(const halo_faces *h); /* MPI_Irecv, MPI_Isend, MPI_Waitall */
void halo_naive(const halo_faces *h);       /* everyone sends first: a chain above the eager limit */

/* The process grid: dims (entries 0 chosen by MPI_Dims_create for the size of comm), a
   non-periodic Cartesian communicator *cart over it (ranks not reordered), this rank's coords
   and its neighbours nbr[k] across face k (MPI_PROC_NULL at the domain boundary). */
void topology(MPI_Comm comm, int dims[2], MPI_Comm *cart, int coords[2], int nbr[N_FACES]);

/* Block split of n points over p parts, the remainder to the first parts: part c gets *len
   points starting at global index *start. */
void split(long long n, int p, int c, long long *len, long long *start);

#endif
