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

/* The shared-memory BTL: vader up to Open MPI 4.1, sm from 5.0, where the old name survives as a
   synonym: every btl_sm_* variable is also registered as btl_vader_*, so MPI_T shows both. */
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
#define SHM_BTL "sm"
#define SHM_SYNONYM "vader"
#else
#define SHM_BTL "vader"
#define SHM_SYNONYM "sm"
#endif

static int is_shared_memory(const char *btl)
{
    return strcmp(btl, "sm") == 0 || strcmp(btl, "vader") == 0 || strcmp(btl, "smcuda") == 0;
}

typedef struct {
    char name[64];
    long long exclusivity; /* btl_<name>_exclusivity, -1 if MPI_T did not show it */
} btl_seen;

/* Without the BML endpoint (no internal headers), MPI_T only tells which BTL components are
   still open, and open is not used: on one node tcp stays open beside vader although ob1 sends
   every message to the peer through vader. The open list settles the question when a single BTL
   besides self is open, since the peer (traffic has flowed) can only have been reached through
   it ("MPI_T-sole-open"). One more case is settled by the BML's own rule, which sends towards a
   peer through the BTLs of highest exclusivity among those that reach it: a peer on this node is
   always reached by the shared-memory BTL, so when that BTL is open and its exclusivity (MPI_T)
   is above every other open BTL's, it carries the traffic ("MPI_T-exclusivity"). Nothing more is
   inferred: an open network BTL may have found no device (Open MPI 5's uct stays open with a high
   exclusivity and no module), so for a remote peer, or with shared memory excluded, leave t->btl
   empty and say "unknown" rather than list BTLs that may carry nothing. Returns the source name. */
static const char *btl_from_open(hpc_transport *t, const btl_seen *seen, int nseen, int peer_local)
{
    int others = 0, self = 0;
    const btl_seen *other = NULL, *shm = NULL;
    for (int i = 0; i < nseen; i++) {
        if (strcmp(seen[i].name, "self") == 0) {
            self = 1;
        } else {
            others++;
            other = &seen[i];
            if (is_shared_memory(seen[i].name)) shm = &seen[i];
        }
    }
    const char *source = "MPI_T-sole-open";
    if (others != 1) {
        if (peer_local != 1 || !shm || shm->exclusivity < 0) return "unknown";
        for (int i = 0; i < nseen; i++) {
            const btl_seen *b = &seen[i];
            if (b == shm || strcmp(b->name, "self") == 0) continue;
            if (b->exclusivity < 0 || b->exclusivity >= shm->exclusivity) return "unknown";
        }
        other = shm;
        source = "MPI_T-exclusivity";
    }
    if (self) list_add(t->btl, sizeof t->btl, "self");
    list_add(t->btl, sizeof t->btl, other->name);
    return source;
}

/* Record an open BTL (its synonym folded into the real name) and, if given, its exclusivity. */
static void btl_note(btl_seen *seen, int *nseen, int max, const char *comp, const char *name,
                     int index, MPI_Datatype dt)
{
    if (strcmp(comp, SHM_SYNONYM) == 0) comp = SHM_BTL;
    int i = 0;
    while (i < *nseen && strcmp(seen[i].name, comp) != 0) i++;
    if (i == *nseen) {
        if (*nseen == max) return;
        snprintf(seen[i].name, sizeof seen[i].name, "%s", comp);
        seen[i].exclusivity = -1;
        (*nseen)++;
    }
    const char *tail = strrchr(name, '_');
    if (!tail || strcmp(tail, "_exclusivity") != 0 || (dt != MPI_UNSIGNED && dt != MPI_INT)) return;
    MPI_T_cvar_handle h;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, NULL, &h, &count) != MPI_SUCCESS) return;
    unsigned int u = 0;
    int v = 0;
    if (count == 1 && MPI_T_cvar_read(h, dt == MPI_UNSIGNED ? (void *)&u : (void *)&v) == MPI_SUCCESS)
        seen[i].exclusivity = dt == MPI_UNSIGNED ? (long long)u : (long long)v;
    MPI_T_cvar_handle_free(&h);
}

void hpc_transport_detect(hpc_transport *t, MPI_Comm comm, int peer, int peer_local)
{
    memset(t, 0, sizeof *t);
    char pmls[256] = "", mtls[256] = "";
    btl_seen seen[16];
    int nseen = 0;
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
            if (component_of(name, "btl", comp, sizeof comp))
                btl_note(seen, &nseen, (int)(sizeof seen / sizeof seen[0]), comp, name, i, dt);
            if (component_of(name, "mtl", comp, sizeof comp)) list_add(mtls, sizeof mtls, comp);
        }
        MPI_T_finalize();
    }

    for (int i = 0; i < nseen; i++) list_add(t->btl_open, sizeof t->btl_open, seen[i].name);

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
        if (!*t->btl && nseen) btl_src = btl_from_open(t, seen, nseen, peer_local);
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
