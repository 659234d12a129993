/* MPI_T readback and writes of the collective algorithm variables (see algorithm.h). */
#include "algorithm.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mpit_up = 0;

int hpc_mpit_start(void)
{
    int provided;
    mpit_up = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS;
    return mpit_up ? 0 : -1;
}

void hpc_mpit_stop(void)
{
    if (mpit_up) MPI_T_finalize();
    mpit_up = 0;
}

/* The index of a control variable, or -1. MPI_T_cvar_get_index is MPI 3.1; the scan keeps the
   kernel working with a library that lacks it, and skips variables a closed component
   deregistered (their get_info fails). */
static int cvar_index(const char *name, MPI_Datatype *dt, MPI_T_enum *en)
{
    if (!mpit_up) return -1;
    int n = 0;
    if (MPI_T_cvar_get_num(&n) != MPI_SUCCESS) return -1;
    for (int i = 0; i < n; i++) {
        char got[256], desc[8];
        int nl = sizeof got, dl = sizeof desc, verb, bind, scope;
        MPI_Datatype d;
        MPI_T_enum e;
        if (MPI_T_cvar_get_info(i, got, &nl, &verb, &d, &e, desc, &dl, &bind, &scope) != MPI_SUCCESS)
            continue;
        if (strcmp(got, name) == 0) {
            if (dt) *dt = d;
            if (en) *en = e;
            return i;
        }
    }
    return -1;
}

/* Integer-like MPI_T types only: every algorithm selector and switch is one of these. */
static int read_as_ll(int index, MPI_Datatype dt, long long *value)
{
    MPI_T_cvar_handle h;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, NULL, &h, &count) != MPI_SUCCESS) return -1;
    int rc = -1;
    if (count == 1) {
        if (dt == MPI_INT) {
            int v = 0;
            if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) *value = v, rc = 0;
        } else if (dt == MPI_UNSIGNED) {
            unsigned v = 0;
            if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) *value = v, rc = 0;
        } else if (dt == MPI_LONG || dt == MPI_UNSIGNED_LONG) {
            long v = 0;
            if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) *value = v, rc = 0;
        } else if (dt == MPI_LONG_LONG || dt == MPI_UNSIGNED_LONG_LONG) {
            long long v = 0;
            if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) *value = v, rc = 0;
        } else if (dt == MPI_C_BOOL) { /* Open MPI's bool parameters */
            _Bool v = 0;
            if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) *value = v, rc = 0;
        }
    }
    MPI_T_cvar_handle_free(&h);
    return rc;
}

static int write_ll(int index, MPI_Datatype dt, long long value)
{
    MPI_T_cvar_handle h;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, NULL, &h, &count) != MPI_SUCCESS) return -1;
    int rc = -1;
    if (count == 1) {
        if (dt == MPI_INT) {
            int v = (int)value;
            rc = MPI_T_cvar_write(h, &v);
        } else if (dt == MPI_UNSIGNED) {
            unsigned v = (unsigned)value;
            rc = MPI_T_cvar_write(h, &v);
        } else if (dt == MPI_LONG || dt == MPI_UNSIGNED_LONG) {
            long v = (long)value;
            rc = MPI_T_cvar_write(h, &v);
        } else if (dt == MPI_LONG_LONG || dt == MPI_UNSIGNED_LONG_LONG) {
            rc = MPI_T_cvar_write(h, &value);
        } else if (dt == MPI_C_BOOL) {
            _Bool v = value != 0;
            rc = MPI_T_cvar_write(h, &v);
        }
    }
    MPI_T_cvar_handle_free(&h);
    return rc;
}

int hpc_cvar_read_int(const char *name, long long *value)
{
    MPI_Datatype dt;
    int i = cvar_index(name, &dt, NULL);
    return i < 0 ? -1 : read_as_ll(i, dt, value);
}

int hpc_variant_parse(const char *text, hpc_variant *v, char *why, size_t n)
{
    memset(v, 0, sizeof *v);
    snprintf(v->label, sizeof v->label, "%s", text);
    if (strcmp(text, "default") == 0) return 0;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", text);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1]) {
            snprintf(why, n, "'%s' is not NAME=VALUE", tok);
            return -1;
        }
        if (v->nwrites == HPC_MAX_WRITES) {
            snprintf(why, n, "more than %d variables in one variant", HPC_MAX_WRITES);
            return -1;
        }
        *eq = '\0';
        char *end = NULL;
        long long val = strtoll(eq + 1, &end, 10);
        if (!end || *end) {
            snprintf(why, n, "the value of %s must be an integer (the library's number for it), got '%s'", tok,
                     eq + 1);
            return -1;
        }
        hpc_cvar_write *w = &v->writes[v->nwrites++];
        snprintf(w->name, sizeof w->name, "%s", tok);
        w->value = val;
    }
    return 0;
}

int hpc_variant_apply(const hpc_variant *v, char names[][96], const long long *base, int nnames,
                      char *why, size_t n)
{
    for (int k = 0; k < nnames; k++) {
        long long want = base[k];
        for (int w = 0; w < v->nwrites; w++)
            if (strcmp(v->writes[w].name, names[k]) == 0) want = v->writes[w].value;
        MPI_Datatype dt;
        int i = cvar_index(names[k], &dt, NULL);
        if (i < 0) {
            snprintf(why, n, "MPI_T has no control variable %s in this library", names[k]);
            return -1;
        }
        if (write_ll(i, dt, want) != MPI_SUCCESS) {
            snprintf(why, n, "%s cannot be changed at run time through MPI_T (set it in the environment)",
                     names[k]);
            return -1;
        }
    }
    return 0;
}

static void said(const char *name, hpc_cvar_said *out)
{
    MPI_Datatype dt;
    MPI_T_enum en = MPI_T_ENUM_NULL;
    int i = cvar_index(name, &dt, &en);
    if (i < 0 || read_as_ll(i, dt, &out->value) != 0) return;
    snprintf(out->name, sizeof out->name, "%s", name);
    if (en == MPI_T_ENUM_NULL) return;
    int items = 0, nl = 0;
    char ename[8];
    nl = sizeof ename;
    if (MPI_T_enum_get_info(en, &items, ename, &nl) != MPI_SUCCESS) return;
    for (int k = 0; k < items; k++) {
        int value = 0, sl = sizeof out->text;
        char text[64];
        sl = sizeof text;
        if (MPI_T_enum_get_item(en, k, &value, text, &sl) == MPI_SUCCESS && value == out->value) {
            snprintf(out->text, sizeof out->text, "%s", text);
            return;
        }
    }
}

void hpc_cvar_said_for(const char *op, hpc_cvar_said *out)
{
    memset(out, 0, sizeof *out);
    char name[96], upper[32];
    size_t k = 0;
    for (; op[k] && k < sizeof upper - 1; k++) upper[k] = (char)toupper((unsigned char)op[k]);
    upper[k] = '\0';
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm", op); /* Open MPI */
    said(name, out);
    if (*out->name) return;
    snprintf(name, sizeof name, "MPIR_CVAR_%s_INTRA_ALGORITHM", upper); /* MPICH */
    said(name, out);
}

void hpc_cvar_gate(hpc_cvar_said *out)
{
    memset(out, 0, sizeof *out);
    said("coll_tuned_use_dynamic_rules", out);
}

#ifdef HPCLAB_OMPI_INTERNALS
int hpc_ompi_coll_function(MPI_Comm comm, const char *op, char *out, size_t n);
#endif

void hpc_coll_function(MPI_Comm comm, const char *op, char *out, size_t n)
{
    out[0] = '\0';
#ifdef HPCLAB_OMPI_INTERNALS
    hpc_ompi_coll_function(comm, op, out, n);
#else
    (void)comm;
    (void)op;
    (void)n;
#endif
}
