/* The report every kernel prints (docs/kernel-contract.md): arguments line, banner, aligned
   key = value block with one host line per rank, validation line, then the kernel's rates; and
   the same report as JSON with --json FILE. Rank 0 prints and writes; calls marked collective
   must be made by every rank. */
#ifndef HPCLAB_REPORT_H
#define HPCLAB_REPORT_H
#include "json.h"
#include "placement.h"

#ifndef HPCLAB_VERSION
#define HPCLAB_VERSION "dev"
#endif
#ifndef HPCLAB_BUILD_FLAGS
#define HPCLAB_BUILD_FLAGS "unknown"
#endif

#define HPC_MAX_KV 64

typedef struct {
    char key[48];
    char text[512];
    char json[1024];
} hpc_kv;

typedef struct {
    const char *kernel, *description;
    int argc;
    char **argv;
    int rank, size;
    int nkv;
    hpc_kv kv[HPC_MAX_KV];
    hpc_placement place;
    int thread_lines; /* print one thread[r.t] line per OpenMP thread */
    int ok;
    char message[512];
    const char *json_path; /* NULL: no JSON */
} hpc_report;

/* Fills the common keys: kernel, version, ranks, threads, build_flags, compiler, mpi_library. */
void hpc_report_init(hpc_report *r, const char *kernel, const char *description, int argc,
                     char **argv, int threads);
void hpc_kv_str(hpc_report *r, const char *key, const char *val);
void hpc_kv_int(hpc_report *r, const char *key, long long val);
void hpc_kv_num(hpc_report *r, const char *key, double val);
void hpc_kv_bool(hpc_report *r, const char *key, int val);

/* Collective: rank 0 checks that --json FILE does not exist yet and its folder is writable;
   otherwise every rank exits(2). */
void hpc_check_json_path(const char *path);

/* Collective: gather placement (with OpenMP threads if with_threads). */
void hpc_report_placement(hpc_report *r, int with_threads);

/* Rank 0: arguments line, banner, key = value block with host (and thread) lines. */
void hpc_report_header(const hpc_report *r);

/* Collective: combine every rank's verdict; rank 0 prints "Solution validates" or
   "ERROR: <message>". Returns 1 if every rank validated. */
int hpc_report_validation(hpc_report *r, int ok_local, const char *msg_local);

/* Collective: rank 0 writes the JSON report (results: an encoded JSON object, may be NULL).
   Returns the process exit code: 0 valid, 1 invalid or the report could not be written. */
int hpc_report_finish(hpc_report *r, const char *results_json);

#endif
