/* Which Open MPI components carried THIS run's point-to-point traffic, asked of the library at
   run time. See docs/kernel-contract.md ("transport") for the meaning of each field and source. */
#ifndef HPCLAB_TRANSPORT_H
#define HPCLAB_TRANSPORT_H
#include <mpi.h>

typedef struct {
    char pml[64];        /* selected PML, "" if unknown */
    char btl[256];       /* comma list of BTLs used towards self and the peer, "" if none/unknown */
    char mtl[64];        /* selected MTL (only with pml cm), "" if none */
    char btl_open[256];  /* BTL components left open after MPI_Init (MPI_T), comma list */
    char source[160];    /* where each answer came from */
    char req_pml[256], req_btl[256], req_mtl[256]; /* the pml/btl/mtl MCA requests ("" unset) */
    char ucx_tls[256], ucx_devices[256];           /* pml_ucx_tls / pml_ucx_devices cvars */
} hpc_transport;

/* Collective-free; call after traffic with peer has flowed (Open MPI may connect lazily).
   peer_local: 1 if the peer runs on this node, 0 if not, -1 if unknown (used only when MPI_T
   alone must tell which BTL carried the traffic). */
void hpc_transport_detect(hpc_transport *t, MPI_Comm comm, int peer, int peer_local);

#endif
