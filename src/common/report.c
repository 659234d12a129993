/* The shared report block and JSON document (see report.h and docs/kernel-contract.md). */
#include "report.h"

#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"

static hpc_kv *add(hpc_report *r, const char *key)
{
    if (r->nkv >= HPC_MAX_KV) {
        fprintf(stderr, "ERROR: report: more than %d keys (raise HPC_MAX_KV)\n", HPC_MAX_KV);
        exit(1);
    }
    hpc_kv *kv = &r->kv[r->nkv++];
    snprintf(kv->key, sizeof kv->key, "%s", key);
    return kv;
}

void hpc_kv_str(hpc_report *r, const char *key, const char *val)
{
    hpc_kv *kv = add(r, key);
    snprintf(kv->text, sizeof kv->text, "%s", val ? val : "none");
    hpc_json j;
    js_init(&j);
    js_str(&j, NULL, val);
    snprintf(kv->json, sizeof kv->json, "%s", j.buf);
    js_free(&j);
}

void hpc_kv_int(hpc_report *r, const char *key, long long val)
{
    hpc_kv *kv = add(r, key);
    snprintf(kv->text, sizeof kv->text, "%lld", val);
    snprintf(kv->json, sizeof kv->json, "%lld", val);
}

void hpc_kv_num(hpc_report *r, const char *key, double val)
{
    hpc_kv *kv = add(r, key);
    snprintf(kv->text, sizeof kv->text, "%g", val);
    snprintf(kv->json, sizeof kv->json, "%.17g", val);
}

void hpc_kv_bool(hpc_report *r, const char *key, int val)
{
    hpc_kv *kv = add(r, key);
    snprintf(kv->text, sizeof kv->text, "%s", val ? "yes" : "no");
    snprintf(kv->json, sizeof kv->json, "%s", val ? "true" : "false");
}

void hpc_report_init(hpc_report *r, const char *kernel, const char *description, int argc,
                     char **argv, int threads)
{
    memset(r, 0, sizeof *r);
    r->kernel = kernel;
    r->description = description;
    r->argc = argc;
    r->argv = argv;
    r->ok = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->size);

    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = '\0'; /* first line only */

    hpc_kv_str(r, "kernel", kernel);
    hpc_kv_str(r, "version", HPCLAB_VERSION);
    hpc_kv_int(r, "ranks", r->size);
    hpc_kv_int(r, "threads", threads);
    hpc_kv_str(r, "build_flags", HPCLAB_BUILD_FLAGS);
#if defined(__clang__)
    hpc_kv_str(r, "compiler", "clang " __clang_version__);
#elif defined(__GNUC__)
    hpc_kv_str(r, "compiler", "gcc " __VERSION__);
#else
    hpc_kv_str(r, "compiler", "unknown");
#endif
    hpc_kv_str(r, "mpi_library", lib);
}

void hpc_check_json_path(const char *path)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char what[PATH_MAX + 128] = "";
    int bad = 0;
    if (rank == 0) {
        char copy[PATH_MAX];
        snprintf(copy, sizeof copy, "%s", path);
        const char *dir = dirname(copy);
        if (path[0] == '\0') {
            bad = 1;
            snprintf(what, sizeof what, "empty file name");
        } else if (access(path, F_OK) == 0) {
            bad = 1;
            snprintf(what, sizeof what, "%s already exists (reports are never overwritten)", path);
        } else if (access(dir, W_OK) != 0) {
            bad = 1;
            snprintf(what, sizeof what, "folder %s is not writable (%s)", dir, strerror(errno));
        }
    }
    hpc_agree_usage_error(bad, "--json", what, "a new file in an existing, writable folder");
}

void hpc_report_placement(hpc_report *r, int with_threads)
{
    r->thread_lines = with_threads;
    hpc_placement_collect(&r->place, with_threads);
}

void hpc_report_header(const hpc_report *r)
{
    if (r->rank != 0) return;
    printf("arguments =");
    for (int i = 1; i < r->argc; i++) printf(" %s", r->argv[i]);
    printf("\n");
    printf("hpclab %s %s - %s\n", r->kernel, HPCLAB_VERSION, r->description);

    /* One width for every key, host and thread lines included, so the block lines up. */
    int cap = r->nkv + r->place.n;
    char(*keys)[48] = calloc((size_t)cap, sizeof *keys);
    char(*vals)[1200] = calloc((size_t)cap, sizeof *vals);
    int n = 0, width = 0;
    for (int i = 0; i < r->nkv; i++, n++) {
        snprintf(keys[n], sizeof keys[n], "%s", r->kv[i].key);
        snprintf(vals[n], sizeof vals[n], "%s", r->kv[i].text);
    }
    for (int i = 0; i < r->place.n; i++) {
        const hpc_where *w = &r->place.w[i];
        if (w->thread >= 0 && !r->thread_lines) continue;
        char cpus[1024];
        hpc_cpulist(w->mask, cpus, sizeof cpus);
        if (w->thread < 0) {
            snprintf(keys[n], sizeof keys[n], "host[%d]", w->rank);
            snprintf(vals[n], sizeof vals[n], "%s cpu=%d allowed=%s", w->host, w->cpu, cpus);
        } else {
            snprintf(keys[n], sizeof keys[n], "thread[%d.%d]", w->rank, w->thread);
            snprintf(vals[n], sizeof vals[n], "cpu=%d allowed=%s", w->cpu, cpus);
        }
        n++;
    }
    for (int i = 0; i < n; i++)
        if ((int)strlen(keys[i]) > width) width = (int)strlen(keys[i]);
    for (int i = 0; i < n; i++) printf("%-*s = %s\n", width, keys[i], vals[i]);
    free(keys);
    free(vals);
    fflush(stdout);
}

int hpc_report_validation(hpc_report *r, int ok_local, const char *msg_local)
{
    int mine = ok_local ? INT_MAX : r->rank, first = INT_MAX;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    r->ok = first == INT_MAX;
    if (r->ok) {
        snprintf(r->message, sizeof r->message, "Solution validates");
    } else if (first == 0) {
        if (r->rank == 0) snprintf(r->message, sizeof r->message, "%s", msg_local);
    } else if (r->rank == first) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s (rank %d)", msg_local, first);
        MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 0, 998, MPI_COMM_WORLD);
    } else if (r->rank == 0) {
        MPI_Recv(r->message, (int)sizeof r->message, MPI_CHAR, first, 998, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    if (r->rank == 0) {
        printf(r->ok ? "%s\n" : "ERROR: %s\n", r->message);
        fflush(stdout);
    }
    return r->ok;
}

static void placement_json(hpc_json *j, const hpc_placement *p)
{
    js_arr_open(j, "placement");
    for (int i = 0; i < p->n; i++) {
        const hpc_where *w = &p->w[i];
        if (w->thread >= 0) continue;
        js_obj_open(j, NULL);
        js_int(j, "rank", w->rank);
        js_str(j, "host", w->host);
        js_int(j, "cpu", w->cpu);
        js_arr_open(j, "allowed");
        for (int c = 0; c < HPC_MAX_CPUS; c++)
            if (w->mask[c / 64] >> (c % 64) & 1ULL) js_int(j, NULL, c);
        js_arr_close(j);
        js_arr_open(j, "threads");
        for (int k = 0; k < p->n; k++) {
            const hpc_where *t = &p->w[k];
            if (t->rank != w->rank || t->thread < 0) continue;
            js_obj_open(j, NULL);
            js_int(j, "thread", t->thread);
            js_int(j, "cpu", t->cpu);
            js_arr_open(j, "allowed");
            for (int c = 0; c < HPC_MAX_CPUS; c++)
                if (t->mask[c / 64] >> (c % 64) & 1ULL) js_int(j, NULL, c);
            js_arr_close(j);
            js_obj_close(j);
        }
        js_arr_close(j);
        js_obj_close(j);
    }
    js_arr_close(j);
}

int hpc_report_finish(hpc_report *r, const char *results_json)
{
    int code = r->ok ? 0 : HPC_EXIT_INVALID;
    if (r->rank == 0 && r->json_path) {
        hpc_json j;
        js_init(&j);
        js_obj_open(&j, NULL);
        js_int(&j, "contract", 1);
        js_str(&j, "kernel", r->kernel);
        js_str(&j, "version", HPCLAB_VERSION);
        js_arr_open(&j, "arguments");
        for (int i = 1; i < r->argc; i++) js_str(&j, NULL, r->argv[i]);
        js_arr_close(&j);
        js_obj_open(&j, "config");
        for (int i = 0; i < r->nkv; i++) js_raw(&j, r->kv[i].key, r->kv[i].json);
        js_obj_close(&j);
        js_obj_open(&j, "validation");
        js_bool(&j, "ok", r->ok);
        js_str(&j, "message", r->message);
        js_obj_close(&j);
        placement_json(&j, &r->place);
        js_raw(&j, "results", results_json ? results_json : "{}");
        js_obj_close(&j);
        if (js_write_file(&j, r->json_path) != 0) {
            fprintf(stderr, "ERROR: --json: could not write %s (%s)\n", r->json_path,
                    strerror(errno));
            code = HPC_EXIT_INVALID;
        }
        js_free(&j);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    hpc_placement_free(&r->place);
    return code;
}
