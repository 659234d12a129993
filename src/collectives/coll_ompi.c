/* Which function serves a collective on a communicator, read through Open MPI's installed internal
   headers: the communicator's coll table holds one function pointer per collective, and the
   dynamic linker names it (ompi_coll_tuned_allreduce_intra_dec_fixed: tuned's fixed decision;
   ..._dec_dynamic: tuned with dynamic rules, where a forced algorithm is honoured;
   mca_coll_han_allreduce_intra_dynamic: han). Built only where the headers compile (Makefile),
   tied to the Open MPI it was compiled against. */
#define _GNU_SOURCE
#include "ompi_config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"

int hpc_ompi_coll_function(MPI_Comm comm, const char *op, char *out, size_t n)
{
    ompi_communicator_t *c = (ompi_communicator_t *)comm;
    if (!c || !c->c_coll) return -1;
    void *fn = NULL;
    if (strcmp(op, "allreduce") == 0) fn = (void *)c->c_coll->coll_allreduce;
    else if (strcmp(op, "bcast") == 0) fn = (void *)c->c_coll->coll_bcast;
    else if (strcmp(op, "alltoall") == 0) fn = (void *)c->c_coll->coll_alltoall;
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_sname) return -1;
    snprintf(out, n, "%s", info.dli_sname);
    return 0;
}
