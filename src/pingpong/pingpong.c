/* pingpong: IMB-style PingPong between ranks 0 and 1 (or every even/odd pair with --pairs).
   For each message size (0 B, then 1 B .. --max-bytes in powers of two, or the list --sizes
   gives) the pair exchanges the message back and forth; t is half the round trip (IMB
   convention). The report also says which Open MPI components (PML, BTLs or MTL) carried this
   run's traffic, read from the library. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "json.h"
#include "report.h"
#include "timer.h"
#include "transport.h"

/* untimed round trips added before the first size (see the sweep below) */
#define FIRST_CONTACT_ROUND_TRIPS 1000

/* Largest message by default: 4 MiB, IMB's PingPong upper end. */
#ifndef PINGPONG_MAX_BYTES
#define PINGPONG_MAX_BYTES (4LL << 20)
#endif
/* Repetitions for small messages; larger ones get fewer so at most PINGPONG_VOLUME bytes move
   per size (IMB's rule of thumb), keeping the 4 MiB point short. */
#ifndef PINGPONG_REPS
#define PINGPONG_REPS 1000
#endif
#ifndef PINGPONG_VOLUME
#define PINGPONG_VOLUME (40LL << 20)
#endif

static const char *ALLOWED =
    "--max-bytes N (0..1073741824), --sizes a,b,... (each 0..1073741824), --reps N (1..10000000), "
    "--warmup N (0..1000000), --pairs, --no-check, --json FILE, --help";

/* --sizes: at most this many, in the order given */
#define MAX_LISTED_SIZES 64

typedef struct {
    long long max_bytes;
    long long listed[MAX_LISTED_SIZES]; /* --sizes, in order; nlisted 0: the power-of-two sweep */
    int nlisted;
    long long reps;   /* 0: size-dependent default */
    long long warmup; /* -1: size-dependent default */
    int pairs, check;
    const char *json;
} options;

static void usage(void)
{
    printf("usage: pingpong [--max-bytes N | --sizes a,b,...] [--reps N] [--warmup N] [--pairs] "
           "[--no-check] [--json FILE]\n"
           "  IMB-style PingPong between ranks 0 and 1 (all even/odd pairs with --pairs).\n"
           "  --max-bytes N  largest message in bytes (default %lld)\n"
           "  --sizes LIST   these sizes in bytes, in this order, instead of the sweep (a comparison\n"
           "                 at two sizes need not pay for the twenty between them)\n"
           "  --reps N       repetitions for every size (default: %d, fewer above %lld bytes)\n"
           "  --warmup N     untimed round trips before each size (default: reps/10, at least 2;\n"
           "                 1000 more before the first size)\n"
           "  --pairs        ranks (0,1), (2,3), ... all run at once; t is the slowest pair\n"
           "  --no-check     do not verify the payload\n"
           "  --json FILE    also write the report as JSON (FILE must not exist)\n",
           PINGPONG_MAX_BYTES, PINGPONG_REPS, PINGPONG_VOLUME / PINGPONG_REPS);
}

static options parse(int argc, char **argv, int rank)
{
    options o = {.max_bytes = PINGPONG_MAX_BYTES, .reps = 0, .warmup = -1, .check = 1};
    int max_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--max-bytes")) {
            o.max_bytes = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 0, 1LL << 30, "0..1073741824");
            max_given = 1;
        } else if (!strcmp(a, "--sizes")) {
            const char *list = hpc_arg_value(argc, argv, &i, ALLOWED);
            char item[32];
            o.nlisted = 0;
            for (const char *p = list;; p++) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                if (len == 0 || len >= sizeof item || o.nlisted == MAX_LISTED_SIZES)
                    hpc_usage_error(a, "a list of 1 to 64 sizes in bytes, comma-separated", ALLOWED);
                memcpy(item, p, len);
                item[len] = '\0';
                o.listed[o.nlisted++] = hpc_arg_ll(a, item, 0, 1LL << 30, "each 0..1073741824");
                if (!comma) break;
                p = comma;
            }
        } else if (!strcmp(a, "--reps"))
            o.reps = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 10000000, "1..10000000");
        else if (!strcmp(a, "--warmup"))
            o.warmup = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 0, 1000000, "0..1000000");
        else if (!strcmp(a, "--pairs"))
            o.pairs = 1;
        else if (!strcmp(a, "--no-check"))
            o.check = 0;
        else if (!strcmp(a, "--json"))
            o.json = hpc_arg_value(argc, argv, &i, ALLOWED);
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0) usage();
            MPI_Finalize();
            exit(0);
        } else
            hpc_usage_error(a, "unknown argument", ALLOWED);
    }
    if (o.nlisted && max_given)
        hpc_usage_error("--sizes", "--sizes and --max-bytes both choose the sizes", "one of them");
    if (o.nlisted) {
        o.max_bytes = 0;
        for (int s = 0; s < o.nlisted; s++)
            if (o.listed[s] > o.max_bytes) o.max_bytes = o.listed[s];
    }
    return o;
}

static long long reps_for(const options *o, long long bytes)
{
    if (o->reps) return o->reps;
    long long r = bytes ? PINGPONG_VOLUME / bytes : PINGPONG_REPS;
    return r > PINGPONG_REPS ? PINGPONG_REPS : (r < 1 ? 1 : r);
}

/* A byte pattern that differs per size and sender, so a stale or misrouted buffer is caught. */
static void fill(unsigned char *b, long long n, long long bytes, int sender)
{
    uint32_t s = (uint32_t)(bytes * 2654435761u) ^ (uint32_t)(sender * 40503u + 1u);
    for (long long i = 0; i < n; i++) b[i] = (unsigned char)((s + (uint32_t)i * 2246822519u) >> 24);
}

static long long mismatches(const unsigned char *b, long long n, long long bytes, int sender)
{
    uint32_t s = (uint32_t)(bytes * 2654435761u) ^ (uint32_t)(sender * 40503u + 1u);
    long long bad = 0;
    for (long long i = 0; i < n; i++)
        bad += b[i] != (unsigned char)((s + (uint32_t)i * 2246822519u) >> 24);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o = parse(argc, argv, rank);
    if (size < 2) {
        char what[128];
        snprintf(what, sizeof what, "pingpong needs at least 2 ranks, got %d", size);
        hpc_usage_error("-np", what, "mpirun -np 2 (or more; extra ranks wait unless --pairs)");
    }
    if (o.json) hpc_check_json_path(o.json);
    unsigned long long avail = hpc_mem_available();
    char what[256];
    snprintf(what, sizeof what, "2 buffers of %lld bytes per rank exceed the %llu bytes available",
             o.max_bytes, avail);
    hpc_agree_usage_error(avail && 2ULL * (unsigned long long)o.max_bytes * (unsigned long long)hpc_ranks_on_host() > avail,
                          "--max-bytes", what, "a smaller size");

    /* Pair p = ranks (2p, 2p+1); without --pairs only pair 0 works, the rest wait. */
    int npairs = o.pairs ? size / 2 : 1;
    int in_pair = rank < 2 * npairs;
    int peer = rank ^ 1, leader = in_pair && rank % 2 == 0;

    size_t cap = o.max_bytes > 0 ? (size_t)o.max_bytes : 1;
    unsigned char *sbuf = NULL, *rbuf = NULL;
    int alloc_bad = posix_memalign((void **)&sbuf, 4096, cap) || posix_memalign((void **)&rbuf, 4096, cap);
    hpc_agree_usage_error(alloc_bad, "--max-bytes", "could not allocate the message buffers",
                          "a smaller size");

    int nsizes = 1;
    if (o.nlisted)
        nsizes = o.nlisted;
    else
        for (long long b = 1; b <= o.max_bytes; b *= 2) nsizes++;
    long long *bytes = calloc((size_t)nsizes, sizeof *bytes);
    long long *reps = calloc((size_t)nsizes, sizeof *reps);
    double *t_pair = calloc((size_t)nsizes * (size_t)(npairs ? npairs : 1), sizeof *t_pair);
    for (int s = 0; s < nsizes; s++) bytes[s] = o.nlisted ? o.listed[s] : (s ? 1LL << (s - 1) : 0);

    /* Does rank 1 run on rank 0's node? The transport report needs it when MPI_T alone must
       tell which BTL carried pair 0's traffic (transport.c); only that pair takes part. */
    int peer_local = -1;
    if (size >= 2 && rank < 2) {
        char mine[MPI_MAX_PROCESSOR_NAME] = "", theirs[MPI_MAX_PROCESSOR_NAME] = "";
        int len = 0;
        MPI_Get_processor_name(mine, &len);
        MPI_Sendrecv(mine, sizeof mine, MPI_CHAR, peer, 2, theirs, sizeof theirs, MPI_CHAR, peer, 2,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        peer_local = strcmp(mine, theirs) == 0;
    }

    long long bad = 0;
    hpc_transport tr;
    memset(&tr, 0, sizeof tr);
    for (int s = 0; s < nsizes; s++) {
        long long n = bytes[s];
        reps[s] = reps_for(&o, n);
        long long warm = o.warmup >= 0 ? o.warmup : (reps[s] / 10 < 2 ? 2 : reps[s] / 10);
        /* The first size also pays for the first contact: a library connects lazily, and its
           first messages over a new connection are slower (MPICH's UCX over TCP: t(0 B) 4.0-4.2
           us after 100 round trips, 3.8 after 1000, as IMB-MPI1 measures; bench/references.py). */
        if (s == 0 && o.warmup < 0) warm += FIRST_CONTACT_ROUND_TRIPS;
        if (in_pair) {
            fill(sbuf, n, n, rank);
            memset(rbuf, 0, n ? (size_t)n : 1);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* every pair starts each size together */
        double t = 0.0;
        if (in_pair) {
            for (long long r = -warm; r < reps[s]; r++) {
                if (r == 0) t = hpc_now();
                if (leader) {
                    MPI_Send(sbuf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
            t = (hpc_now() - t) / (double)reps[s] / 2.0 * 1e6;
            /* Checked after the timed loop, on the last message that arrived: no cost inside. */
            if (o.check) bad += mismatches(rbuf, n, n, peer);
        }
        double tl = leader ? t : 0.0;
        double *all = rank == 0 ? calloc((size_t)size, sizeof *all) : NULL;
        MPI_Gather(&tl, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rank == 0)
            for (int p = 0; p < npairs; p++) t_pair[(size_t)s * npairs + p] = all[2 * p];
        free(all);
        /* Ask the library after traffic has flowed: connections can be made lazily. */
        if (s == 0 && rank == 0) hpc_transport_detect(&tr, MPI_COMM_WORLD, 1, peer_local);
    }
    long long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    hpc_report rep;
    hpc_report_init(&rep, "pingpong",
                    "IMB-style PingPong; t = half round trip; MB = 10^6 bytes; not an IMB result",
                    argc, argv, 1);
    rep.json_path = o.json;
    long long min_bytes = bytes[0];
    for (int s = 1; s < nsizes; s++)
        if (bytes[s] < min_bytes) min_bytes = bytes[s];
    hpc_kv_int(&rep, "min_bytes", min_bytes);
    hpc_kv_int(&rep, "max_bytes", o.max_bytes);
    hpc_kv_int(&rep, "sizes", nsizes);
    if (o.reps)
        hpc_kv_int(&rep, "repetitions", o.reps);
    else {
        char pol[96];
        snprintf(pol, sizeof pol, "%d, at most %lld bytes moved per size", PINGPONG_REPS,
                 (long long)PINGPONG_VOLUME);
        hpc_kv_str(&rep, "repetitions", pol);
    }
    hpc_kv_int(&rep, "pairs", npairs);
    hpc_kv_bool(&rep, "check_payload", o.check);
    hpc_kv_str(&rep, "pml", *tr.pml ? tr.pml : NULL);
    hpc_kv_str(&rep, "btl", *tr.btl ? tr.btl : NULL);
    hpc_kv_str(&rep, "mtl", *tr.mtl ? tr.mtl : NULL);
    hpc_kv_str(&rep, "transport_source", tr.source);
    hpc_report_placement(&rep, 0);
    hpc_report_header(&rep);

    char msg[256];
    snprintf(msg, sizeof msg, "%lld payload bytes differ from what was sent", bad_all);
    hpc_report_validation(&rep, bad_all == 0, msg);

    hpc_json res;
    js_init(&res);
    if (rank == 0) {
        printf("%12s %12s %14s %14s\n", "#bytes", "#repetitions", "t[usec]", "Mbytes/sec");
        js_obj_open(&res, NULL);
        js_obj_open(&res, "transport");
        js_str(&res, "pml", *tr.pml ? tr.pml : NULL);
        js_arr_open(&res, "btl");
        char list[256];
        snprintf(list, sizeof list, "%s", tr.btl);
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) js_str(&res, NULL, tok);
        js_arr_close(&res);
        js_str(&res, "mtl", *tr.mtl ? tr.mtl : NULL);
        js_str(&res, "source", tr.source);
        js_arr_open(&res, "btl_open");
        snprintf(list, sizeof list, "%s", tr.btl_open);
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) js_str(&res, NULL, tok);
        js_arr_close(&res);
        js_obj_open(&res, "requested");
        js_str(&res, "pml", tr.req_pml);
        js_str(&res, "btl", tr.req_btl);
        js_str(&res, "mtl", tr.req_mtl);
        js_obj_close(&res);
        if (!strcmp(tr.pml, "ucx")) {
            js_obj_open(&res, "ucx");
            js_str(&res, "pml_ucx_tls", tr.ucx_tls);
            js_str(&res, "pml_ucx_devices", tr.ucx_devices);
            js_str(&res, "UCX_TLS", getenv("UCX_TLS"));
            js_obj_close(&res);
        }
        js_obj_close(&res);
        js_int(&res, "pairs", npairs);
        js_bool(&res, "check_payload", o.check);
        js_arr_open(&res, "rows");
        for (int s = 0; s < nsizes; s++) {
            double worst = 0.0;
            for (int p = 0; p < npairs; p++)
                if (t_pair[(size_t)s * npairs + p] > worst) worst = t_pair[(size_t)s * npairs + p];
            double mbs = worst > 0 ? (double)bytes[s] / worst : 0.0; /* bytes/usec = MB/s */
            printf("%12lld %12lld %14.2f %14.2f\n", bytes[s], reps[s], worst, mbs);
            js_obj_open(&res, NULL);
            js_int(&res, "bytes", bytes[s]);
            js_int(&res, "repetitions", reps[s]);
            js_num(&res, "t_usec", worst);
            js_num(&res, "mbytes_per_sec", mbs);
            if (npairs > 1) {
                js_arr_open(&res, "t_usec_pairs");
                for (int p = 0; p < npairs; p++) js_num(&res, NULL, t_pair[(size_t)s * npairs + p]);
                js_arr_close(&res);
            }
            js_obj_close(&res);
        }
        js_arr_close(&res);
        js_obj_close(&res);
        fflush(stdout);
    }
    int code = hpc_report_finish(&rep, res.buf);
    js_free(&res);
    free(sbuf);
    free(rbuf);
    free(bytes);
    free(reps);
    free(t_pair);
    MPI_Finalize();
    return code;
}
