/* Transport detection for pingpong.
   PML: Open MPI deregisters the MCA variables of every component it closes, so after MPI_Init
   the only pml_<name>_* control variables still visible through MPI_T belong to the selected
   PML. The same holds for BTLs, but "open" is not "used": with ob1 the BML (r2) picks per peer
   the BTLs of highest exclusivity, so when the library's own headers are available at build
   time (HPCLAB_OMPI_INTERNALS) we read the peer's BML endpoint instead (transport_ompi.c). */
#include "transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HPCLAB_OMPI_INTERNALS
int hpc_ompi_btls(MPI_Comm comm, int peer, char *out, size_t n);
int hpc_ompi_mtl(char *out, size_t n);
int hpc_ompi_pml(char *out, size_t n);
#endif

static void list_add(char *list, size_t n, const char *item)
{
    /* comma list without duplicates */
    size_t len = strlen(item);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && strncmp(p, item, len) == 0) return;
        p = e ? e + 1 : p + l;
    }
    if (strlen(list) + len + 2 > n) return;
    if (*list) strcat(list, ",");
    strcat(list, item);
}

static void read_string_cvar(int index, char *out, size_t n)
{
    MPI_T_cvar_handle h;
    int count = 0;
    out[0] = '\0';
    if (MPI_T_cvar_handle_alloc(index, NULL, &h, &count) != MPI_SUCCESS) return;
    if (count > 0 && (size_t)count < 65536) {
        char *buf = calloc((size_t)count + 1, 1);
        if (buf && MPI_T_cvar_read(h, buf) == MPI_SUCCESS) snprintf(out, n, "%s", buf);
        free(buf);
    }
    MPI_T_cvar_handle_free(&h);
}

/* Component name of "<framework>_<component>_<param>", or 0 if the variable is framework-wide. */
static int component_of(const char *name, const char *framework, char *out, size_t n)
{
    size_t fl = strlen(framework);
    if (strncmp(name, framework, fl) != 0 || name[fl] != '_') return 0;
    const char *c = name + fl + 1, *e = strchr(c, '_');
    if (!e || e == c) return 0;
    snprintf(out, n, "%.*s", (int)(e - c), c);
    return strcmp(out, "base") != 0;
}

/* Without the BML endpoint (no internal headers), MPI_T only tells which BTL components are
   still open, and open is not used: on one node tcp stays open beside vader although ob1 sends
   every message to the peer through vader. The open list settles the question only when a single
   BTL besides self is open, since the peer (traffic has flowed) can only have been reached
   through it; otherwise leave t->btl empty and say "unknown" rather than list BTLs that may carry
   nothing. Returns the source name. */
static const char *btl_from_open(hpc_transport *t)
{
    char list[sizeof t->btl_open], other[64] = "";
    int others = 0, self = 0;
    snprintf(list, sizeof list, "%s", t->btl_open);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "self") == 0) {
            self = 1;
        } else {
            others++;
            snprintf(other, sizeof other, "%s", tok);
        }
    }
    if (others != 1) return "unknown";
    if (self) list_add(t->btl, sizeof t->btl, "self");
    list_add(t->btl, sizeof t->btl, other);
    return "MPI_T-sole-open";
}

void hpc_transport_detect(hpc_transport *t, MPI_Comm comm, int peer)
{
    memset(t, 0, sizeof *t);
    char pmls[256] = "", mtls[256] = "";
    int provided, ncvar = 0;
    int mpit = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS;
    if (mpit && MPI_T_cvar_get_num(&ncvar) == MPI_SUCCESS) {
        for (int i = 0; i < ncvar; i++) {
            char name[256], desc[8];
            int nl = sizeof name, dl = sizeof desc, verb, bind, scope;
            MPI_Datatype dt;
            MPI_T_enum en;
            /* Deregistered variables (closed components) fail here: that is the signal. */
            if (MPI_T_cvar_get_info(i, name, &nl, &verb, &dt, &en, desc, &dl, &bind, &scope) !=
                MPI_SUCCESS)
                continue;
            char comp[64];
            if (dt == MPI_CHAR && strcmp(name, "pml") == 0) read_string_cvar(i, t->req_pml, sizeof t->req_pml);
            else if (dt == MPI_CHAR && strcmp(name, "btl") == 0) read_string_cvar(i, t->req_btl, sizeof t->req_btl);
            else if (dt == MPI_CHAR && strcmp(name, "mtl") == 0) read_string_cvar(i, t->req_mtl, sizeof t->req_mtl);
            else if (dt == MPI_CHAR && strcmp(name, "pml_ucx_tls") == 0) read_string_cvar(i, t->ucx_tls, sizeof t->ucx_tls);
            else if (dt == MPI_CHAR && strcmp(name, "pml_ucx_devices") == 0) read_string_cvar(i, t->ucx_devices, sizeof t->ucx_devices);
            if (component_of(name, "pml", comp, sizeof comp)) list_add(pmls, sizeof pmls, comp);
            if (component_of(name, "btl", comp, sizeof comp)) list_add(t->btl_open, sizeof t->btl_open, comp);
            if (component_of(name, "mtl", comp, sizeof comp)) list_add(mtls, sizeof mtls, comp);
        }
        MPI_T_finalize();
    }

    const char *pml_src = "unknown";
    if (mpit && *pmls && !strchr(pmls, ',')) {
        snprintf(t->pml, sizeof t->pml, "%s", pmls);
        pml_src = "MPI_T";
    }
#ifdef HPCLAB_OMPI_INTERNALS
    else if (hpc_ompi_pml(t->pml, sizeof t->pml) == 0) {
        pml_src = "pml_base";
    }
#endif

    const char *btl_src = "none", *mtl_src = "none";
    int uses_bml = strcmp(t->pml, "ob1") == 0 || strcmp(t->pml, "bfo") == 0;
    if (uses_bml) {
#ifdef HPCLAB_OMPI_INTERNALS
        if (hpc_ompi_btls(comm, peer, t->btl, sizeof t->btl) == 0) btl_src = "bml-endpoint";
#endif
        if (!*t->btl && *t->btl_open) btl_src = btl_from_open(t);
    }
    if (strcmp(t->pml, "cm") == 0) {
#ifdef HPCLAB_OMPI_INTERNALS
        if (hpc_ompi_mtl(t->mtl, sizeof t->mtl) == 0) mtl_src = "mtl_base";
#endif
        if (!*t->mtl && *mtls) {
            snprintf(t->mtl, sizeof t->mtl, "%s", mtls);
            mtl_src = "MPI_T-open";
        }
    }
    (void)comm;
    (void)peer;
    snprintf(t->source, sizeof t->source, "pml:%s btl:%s mtl:%s", pml_src, btl_src, mtl_src);
}
