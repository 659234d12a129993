/* collectives: MPI_Allreduce, MPI_Bcast and MPI_Alltoall timed the way IMB-MPI1 times them, with
   the algorithm the library says it used.

   Per operation and message size, as IMB-MPI1 (2021) does: an untimed warm-up of a tenth of the
   repetitions (at least 10, at most all of them), two barriers, then every repetition timed on its
   own and followed by an untimed barrier (IMB's -sync 1); a rank's time is the mean of its
   repetitions, and the report gives the fastest rank's, the slowest rank's (t_max, IMB's headline
   column) and their mean. Allreduce sums floats (IMB's MPI_FLOAT, MPI_SUM), Bcast and Alltoall move
   bytes; Alltoall's size is the block each rank sends to each other rank, Bcast's root is rank 0.
   --off-cache MB rotates through buffers spanning twice that many MiB, as IMB's -off_cache does,
   so that a repetition does not find its data in the cache.

   Beyond IMB: --variant NAME=V,... (repeatable) runs the same sweep under several settings of the
   library's MPI_T control variables (algorithm.h), round by round (--rounds), on communicators
   duplicated after each setting; --order block|cyclic renumbers the ranks over the nodes found
   (MPI_COMM_TYPE_SHARED) as srun --distribution=block|cyclic numbers them. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithm.h"
#include "args.h"
#include "json.h"
#include "report.h"
#include "timer.h"

/* Sizes by default: 8 B to 4 MiB in powers of two (IMB's upper end; 8 B is two floats). */
#ifndef COLL_MIN_BYTES
#define COLL_MIN_BYTES 8LL
#endif
#ifndef COLL_MAX_BYTES
#define COLL_MAX_BYTES (4LL << 20)
#endif
/* IMB's repetition rule: at most this many per size, and at most COLL_VOLUME bytes per size. */
#ifndef COLL_REPS
#define COLL_REPS 1000
#endif
#ifndef COLL_VOLUME
#define COLL_VOLUME (40LL << 20)
#endif
/* --off-cache with no size known: IMB's own default last-level cache (IMB_mem_info.h: 25 MB) */
#ifndef COLL_CACHE_MB
#define COLL_CACHE_MB 25.0
#endif
#define CACHE_LINE 64
#define MAX_SIZES 32
#define MAX_VARIANTS 8
#define N_BARR 2

enum { OP_ALLREDUCE, OP_BCAST, OP_ALLTOALL, NOPS };
static const char *OP_NAME[NOPS] = {"allreduce", "bcast", "alltoall"};
enum { ORDER_WORLD, ORDER_BLOCK, ORDER_CYCLIC, NORDERS };
static const char *ORDER_NAME[NORDERS] = {"world", "block", "cyclic"};

static const char *ALLOWED =
    "--ops allreduce,bcast,alltoall, --sizes N,N,... or --min-bytes N --max-bytes N (4..1073741824), "
    "--reps N (1..10000000), --warmup N (0..1000000), --off-cache MB (-1 or 0.01..65536), --no-sync, "
    "--order world|block|cyclic[,...], --variant NAME=V[,NAME=V] (repeatable) or default, --rounds N "
    "(1..1000), --no-check, --json FILE, --help";

typedef struct {
    int op[NOPS], nops;
    long long sizes[MAX_SIZES];
    int nsizes;
    long long min_bytes, max_bytes;
    long long reps;   /* 0: IMB's rule per size */
    long long warmup; /* -1: IMB's rule */
    double off_cache; /* MiB; 0: off */
    int sync, check, rounds;
    int order[NORDERS], norders;
    hpc_variant variant[MAX_VARIANTS];
    int nvariants;
    const char *json;
} options;

static void usage(void)
{
    printf("usage: collectives [--ops LIST] [--sizes LIST | --min-bytes N --max-bytes N] [--reps N]\n"
           "                   [--warmup N] [--off-cache MB] [--no-sync] [--order LIST]\n"
           "                   [--variant NAME=V,...]... [--rounds N] [--no-check] [--json FILE]\n"
           "  IMB-style timing of MPI_Allreduce (floats, sum), MPI_Bcast (root 0) and MPI_Alltoall.\n"
           "  --ops LIST       allreduce,bcast,alltoall (default: all three)\n"
           "  --sizes LIST     message sizes in bytes (Alltoall: per destination; Allreduce: a multiple of 4)\n"
           "  --min-bytes N    smallest size of the power-of-two sweep (default %lld)\n"
           "  --max-bytes N    largest size (default %lld)\n"
           "  --reps N         timed repetitions per size (default: %d, fewer so that at most %lld\n"
           "                   bytes move per size, as IMB)\n"
           "  --warmup N       untimed calls before each size (default: reps/10, at least min(10, reps))\n"
           "  --off-cache MB   rotate through buffers of 2 x MB MiB (IMB -off_cache; -1: %g MB)\n"
           "  --no-sync        no barrier between repetitions (IMB -sync 0)\n"
           "  --order LIST     rank orders over the nodes: world (as launched), block, cyclic\n"
           "  --variant V      NAME=VALUE[,NAME=VALUE] MPI_T control variables, or default (repeatable)\n"
           "  --rounds N       repeat the sweep over orders and variants N times (default 1)\n"
           "  --no-check       do not verify the results\n"
           "  --json FILE      also write the report as JSON (FILE must not exist)\n",
           COLL_MIN_BYTES, COLL_MAX_BYTES, COLL_REPS, COLL_VOLUME, COLL_CACHE_MB);
}

static int parse_list(const char *text, const char *const *names, int count, int *out, int max)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", text);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < count && strcmp(tok, names[k]) != 0) k++;
        if (k == count || n == max) return -1;
        for (int j = 0; j < n; j++)
            if (out[j] == k) return -1;
        out[n++] = k;
    }
    return n;
}

static options parse(int argc, char **argv, int rank)
{
    options o;
    memset(&o, 0, sizeof o);
    o.min_bytes = COLL_MIN_BYTES;
    o.max_bytes = COLL_MAX_BYTES;
    o.warmup = -1;
    o.sync = o.check = o.rounds = 1;
    for (int k = 0; k < NOPS; k++) o.op[k] = k;
    o.nops = NOPS;
    o.order[0] = ORDER_WORLD;
    o.norders = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--ops")) {
            o.nops = parse_list(hpc_arg_value(argc, argv, &i, ALLOWED), OP_NAME, NOPS, o.op, NOPS);
            if (o.nops <= 0) hpc_usage_error(a, "unknown or repeated operation", "allreduce,bcast,alltoall");
        } else if (!strcmp(a, "--order")) {
            o.norders = parse_list(hpc_arg_value(argc, argv, &i, ALLOWED), ORDER_NAME, NORDERS, o.order, NORDERS);
            if (o.norders <= 0) hpc_usage_error(a, "unknown or repeated order", "world,block,cyclic");
        } else if (!strcmp(a, "--sizes")) {
            char copy[1024];
            snprintf(copy, sizeof copy, "%s", hpc_arg_value(argc, argv, &i, ALLOWED));
            o.nsizes = 0;
            for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o.nsizes == MAX_SIZES) hpc_usage_error(a, "too many sizes", "at most 32");
                o.sizes[o.nsizes++] = hpc_arg_ll(a, tok, 1, 1LL << 30, "1..1073741824 each");
            }
                if (!o.nsizes) hpc_usage_error(a, "no size given", "N,N,...");
        } else if (!strcmp(a, "--min-bytes"))
            o.min_bytes = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 1LL << 30, "1..1073741824");
        else if (!strcmp(a, "--max-bytes"))
            o.max_bytes = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 1LL << 30, "1..1073741824");
        else if (!strcmp(a, "--reps"))
            o.reps = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 10000000, "1..10000000");
        else if (!strcmp(a, "--warmup"))
            o.warmup = hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 0, 1000000, "0..1000000");
        else if (!strcmp(a, "--off-cache")) {
            o.off_cache = hpc_arg_double(a, hpc_arg_value(argc, argv, &i, ALLOWED), -1, 65536, "-1 or 0.01..65536");
            if (o.off_cache < 0) o.off_cache = COLL_CACHE_MB;
            else if (o.off_cache < 0.01) hpc_usage_error(a, "cache size below 0.01 MB", "-1 or 0.01..65536");
        } else if (!strcmp(a, "--no-sync"))
            o.sync = 0;
        else if (!strcmp(a, "--rounds"))
            o.rounds = (int)hpc_arg_ll(a, hpc_arg_value(argc, argv, &i, ALLOWED), 1, 1000, "1..1000");
        else if (!strcmp(a, "--variant")) {
            const char *text = hpc_arg_value(argc, argv, &i, ALLOWED);
            char why[256];
            if (o.nvariants == MAX_VARIANTS) hpc_usage_error(a, "too many variants", "at most 8");
            if (hpc_variant_parse(text, &o.variant[o.nvariants], why, sizeof why) != 0)
                hpc_usage_error(a, why, "NAME=VALUE[,NAME=VALUE] or default");
            o.nvariants++;
        } else if (!strcmp(a, "--no-check"))
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
    if (!o.nsizes) {
        if (o.min_bytes > o.max_bytes) hpc_usage_error("--min-bytes", "larger than --max-bytes", "min <= max");
        for (long long b = o.min_bytes; b <= o.max_bytes && o.nsizes < MAX_SIZES; b *= 2) o.sizes[o.nsizes++] = b;
    }
    for (int k = 0; k < o.nops; k++)
        if (o.op[k] == OP_ALLREDUCE)
            for (int s = 0; s < o.nsizes; s++)
                if (o.sizes[s] % 4)
                    hpc_usage_error("--sizes", "an Allreduce size must be a multiple of 4 (floats)", "4, 8, 12, ...");
    if (!o.nvariants) {
        char none[8];
        hpc_variant_parse("default", &o.variant[0], none, sizeof none);
        o.nvariants = 1;
    }
    return o;
}

static long long reps_for(const options *o, long long bytes)
{
    if (o->reps) return o->reps;
    long long r = COLL_VOLUME / bytes;
    return r > COLL_REPS ? COLL_REPS : (r < 1 ? 1 : r);
}

static long long warmup_for(const options *o, long long reps)
{
    if (o->warmup >= 0) return o->warmup;
    long long w = reps / 10;
    return w < 10 ? (reps < 10 ? reps : 10) : w;
}

/* IMB's off-cache layout: each repetition uses the next slot of a buffer spanning twice the cache. */
typedef struct {
    size_t offs;
    long long slots;
} layout;

static layout layout_for(const options *o, size_t len, long long reps)
{
    layout l = {0, 1};
    if (o->off_cache <= 0) return l;
    l.offs = ((len + CACHE_LINE - 1) / CACHE_LINE + 1) * CACHE_LINE;
    long long want = (long long)((2.0 * o->off_cache * 1048576.0 + (double)l.offs - 1) / (double)l.offs);
    l.slots = want < reps ? want : reps;
    if (l.slots < 1) l.slots = 1;
    return l;
}

/* Bytes one rank's send and receive buffers need for one op and size (each). */
static size_t per_buffer(int op, long long bytes, int p)
{
    return op == OP_ALLTOALL ? (size_t)bytes * (size_t)p : (size_t)bytes;
}

/* Payload patterns: they differ per size and sender, so a stale or misrouted buffer is caught. */
static unsigned char pat(long long bytes, int from, int to, size_t i)
{
    uint32_t s = (uint32_t)(bytes * 2654435761u) ^ (uint32_t)(from * 40503u + 1u) ^ (uint32_t)(to * 69069u);
    return (unsigned char)((s + (uint32_t)i * 2246822519u) >> 24);
}

static float term(size_t i) { return (float)(i % 13 + 1); }

/* Fill every slot a sweep uses; the receive side gets the opposite of what must arrive. */
static void prepare(int op, long long bytes, int me, int p, unsigned char *s, unsigned char *r, layout l)
{
    size_t len = per_buffer(op, bytes, p);
    for (long long k = 0; k < l.slots; k++) {
        unsigned char *sb = s + k * l.offs, *rb = r + k * l.offs;
        if (op == OP_ALLREDUCE) {
            float *f = (float *)sb;
            for (size_t i = 0; i < (size_t)bytes / 4; i++) f[i] = (float)(me + 1) * term(i);
            memset(rb, 0xff, len);
        } else if (op == OP_BCAST) {
            for (size_t i = 0; i < len; i++) sb[i] = me == 0 ? pat(bytes, 0, 0, i) : (unsigned char)~pat(bytes, 0, 0, i);
        } else {
            for (int j = 0; j < p; j++)
                for (size_t i = 0; i < (size_t)bytes; i++) {
                    sb[(size_t)j * bytes + i] = pat(bytes, me, j, i);
                    rb[(size_t)j * bytes + i] = (unsigned char)~pat(bytes, j, me, i);
                }
        }
    }
}

/* Elements of the last result that differ from what the operation must deliver. */
static long long mismatches(int op, long long bytes, int me, int p, const unsigned char *s,
                            const unsigned char *r)
{
    long long bad = 0;
    if (op == OP_ALLREDUCE) {
        const float *f = (const float *)r;
        float ranks = (float)p * (float)(p + 1) / 2.0f;
        for (size_t i = 0; i < (size_t)bytes / 4; i++) bad += f[i] != ranks * term(i);
    } else if (op == OP_BCAST) {
        for (size_t i = 0; i < (size_t)bytes; i++) bad += s[i] != pat(bytes, 0, 0, i);
    } else {
        for (int j = 0; j < p; j++)
            for (size_t i = 0; i < (size_t)bytes; i++) bad += r[(size_t)j * bytes + i] != pat(bytes, j, me, i);
    }
    return bad;
}

static void call(int op, long long bytes, void *s, void *r, MPI_Comm c)
{
    if (op == OP_ALLREDUCE)
        MPI_Allreduce(s, r, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, c);
    else if (op == OP_BCAST)
        MPI_Bcast(s, (int)bytes, MPI_BYTE, 0, c);
    else
        MPI_Alltoall(s, (int)bytes, MPI_BYTE, r, (int)bytes, MPI_BYTE, c);
}

/* A communicator whose ranks follow `order` over the nodes: block keeps each node's ranks
   together (node 0's, then node 1's, ...), cyclic deals them out one per node in turn. Nodes are
   numbered by their lowest world rank. */
static MPI_Comm ordered(int order, int *nnodes_out)
{
    int me, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
    int local, leader;
    MPI_Comm_rank(node, &local);
    MPI_Allreduce(&me, &leader, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    int mine[2] = {leader, local}, *all = malloc(sizeof(int) * 2 * (size_t)p);
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    int index = 0, nnodes = 0;
    for (int r = 0; r < p; r++)
        if (all[2 * r] == r) { /* r leads a node: count the leaders below mine */
            if (r < leader) index++;
            nnodes++;
        }
    free(all);
    *nnodes_out = nnodes;
    int key = order == ORDER_BLOCK ? index * p + local : order == ORDER_CYCLIC ? local * nnodes + index : me;
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, 0, key, &c);
    return c;
}

typedef struct {
    int op, order, variant, round;
    long long bytes, reps, warm;
    double tmin, tmax, tavg; /* microseconds */
} row;

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o = parse(argc, argv, rank);
    if (o.json) hpc_check_json_path(o.json);
    int mpit = hpc_mpit_start() == 0;

    /* the variables any variant writes, and their values as the run started */
    char names[MAX_VARIANTS * HPC_MAX_WRITES][96];
    long long base[MAX_VARIANTS * HPC_MAX_WRITES];
    int nnames = 0;
    char why[512] = "";
    int bad = 0;
    for (int v = 0; v < o.nvariants && !bad; v++)
        for (int w = 0; w < o.variant[v].nwrites && !bad; w++) {
            const char *name = o.variant[v].writes[w].name;
            int k = 0;
            while (k < nnames && strcmp(names[k], name) != 0) k++;
            if (k < nnames) continue;
            snprintf(names[nnames], sizeof names[nnames], "%s", name);
            if (!mpit || hpc_cvar_read_int(name, &base[nnames]) != 0) {
                snprintf(why, sizeof why, "MPI_T has no integer control variable %s in this library", name);
                bad = 1;
            }
            nnames++;
        }
    hpc_agree_usage_error(bad, "--variant", why, "the library's MPI_T control variables (ompi_info, mpivars)");

    /* buffers: the largest need over every op and size, with IMB's off-cache slots */
    size_t cap = 1;
    for (int k = 0; k < o.nops; k++)
        for (int s = 0; s < o.nsizes; s++) {
            size_t len = per_buffer(o.op[k], o.sizes[s], size);
            layout l = layout_for(&o, len, reps_for(&o, o.sizes[s]));
            size_t need = l.slots > 1 ? (size_t)l.slots * l.offs : len;
            if (need > cap) cap = need;
        }
    unsigned long long avail = hpc_mem_available();
    snprintf(why, sizeof why, "2 buffers of %zu bytes per rank exceed the %llu bytes available", cap, avail);
    hpc_agree_usage_error(avail && 2ULL * cap * (unsigned long long)hpc_ranks_on_host() > avail, "--max-bytes", why,
                          "smaller sizes (Alltoall needs ranks x size per buffer)");
    unsigned char *sbuf = NULL, *rbuf = NULL;
    int alloc_bad = posix_memalign((void **)&sbuf, 4096, cap) || posix_memalign((void **)&rbuf, 4096, cap);
    hpc_agree_usage_error(alloc_bad, "--max-bytes", "could not allocate the message buffers", "smaller sizes");

    /* one communicator per variant and order, made after the variant's settings are in place */
    MPI_Comm comm[MAX_VARIANTS][NORDERS];
    hpc_cvar_said said[MAX_VARIANTS][NOPS];
    char fn[MAX_VARIANTS][NOPS][128];
    int nnodes = 1;
    for (int v = 0; v < o.nvariants; v++) {
        bad = hpc_variant_apply(&o.variant[v], names, base, nnames, why, sizeof why) != 0;
        hpc_agree_usage_error(bad, "--variant", why, "a variable the library lets MPI_T write");
        for (int k = 0; k < o.norders; k++) comm[v][k] = ordered(o.order[k], &nnodes);
        for (int k = 0; k < o.nops; k++) {
            hpc_cvar_said_for(OP_NAME[o.op[k]], &said[v][o.op[k]]);
            hpc_coll_function(comm[v][0], OP_NAME[o.op[k]], fn[v][o.op[k]], sizeof fn[v][o.op[k]]);
        }
    }
    hpc_cvar_said gate;
    hpc_cvar_gate(&gate);

    size_t nrows = (size_t)o.rounds * o.norders * o.nvariants * o.nops * o.nsizes;
    row *rows = calloc(nrows, sizeof *rows);
    size_t at = 0;
    long long wrong = 0;
    for (int round = 0; round < o.rounds; round++)
        for (int vi = 0; vi < o.nvariants; vi++) {
            int v = (vi + round) % o.nvariants; /* each round starts with the next variant */
            bad = hpc_variant_apply(&o.variant[v], names, base, nnames, why, sizeof why) != 0;
            hpc_agree_usage_error(bad, "--variant", why, "a variable the library lets MPI_T write");
            for (int ko = 0; ko < o.norders; ko++) {
                MPI_Comm c = comm[v][ko];
                int me;
                MPI_Comm_rank(c, &me);
                for (int k = 0; k < o.nops; k++)
                    for (int s = 0; s < o.nsizes; s++) {
                        int op = o.op[k];
                        long long bytes = o.sizes[s], reps = reps_for(&o, bytes), warm = warmup_for(&o, reps);
                        layout l = layout_for(&o, per_buffer(op, bytes, size), reps);
                        if (o.check) prepare(op, bytes, me, size, sbuf, rbuf, l);
                        for (long long i = 0; i < warm; i++)
                            call(op, bytes, sbuf + (i % l.slots) * l.offs, rbuf + (i % l.slots) * l.offs, c);
                        if (o.check) prepare(op, bytes, me, size, sbuf, rbuf, l); /* no stale result */
                        for (int b = 0; b < N_BARR; b++) MPI_Barrier(c);
                        double t = 0.0;
                        for (long long i = 0; i < reps; i++) {
                            unsigned char *sb = sbuf + (i % l.slots) * l.offs, *rb = rbuf + (i % l.slots) * l.offs;
                            t -= hpc_now();
                            call(op, bytes, sb, rb, c);
                            t += hpc_now();
                            if (o.sync) MPI_Barrier(c);
                        }
                        if (o.check) {
                            long long last = (reps - 1) % l.slots;
                            wrong += mismatches(op, bytes, me, size, sbuf + last * l.offs, rbuf + last * l.offs);
                        }
                        double mine = t / (double)reps * 1e6, lo, hi, sum;
                        MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
                        MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                        rows[at++] = (row){op, o.order[ko], v, round, bytes, reps, warm, lo, hi, sum / size};
                    }
            }
        }
    /* leave the library as it started */
    hpc_variant start;
    hpc_variant_parse("default", &start, why, sizeof why);
    if (nnames) hpc_variant_apply(&start, names, base, nnames, why, sizeof why);
    long long wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    hpc_report rep;
    hpc_report_init(&rep, "collectives",
                    "IMB-style Allreduce/Bcast/Alltoall; t = mean per repetition, slowest rank (t_max); "
                    "not an IMB result", argc, argv, 1);
    rep.json_path = o.json;
    char list[512] = "";
    for (int k = 0; k < o.nops; k++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? "," : "", OP_NAME[o.op[k]]);
    hpc_kv_str(&rep, "ops", list);
    list[0] = '\0';
    for (int s = 0; s < o.nsizes; s++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%lld", s ? "," : "", o.sizes[s]);
    hpc_kv_str(&rep, "sizes", list);
    if (o.reps)
        hpc_kv_int(&rep, "repetitions", o.reps);
    else {
        snprintf(list, sizeof list, "%d, at most %lld bytes per size", COLL_REPS, (long long)COLL_VOLUME);
        hpc_kv_str(&rep, "repetitions", list);
    }
    if (o.warmup >= 0)
        hpc_kv_int(&rep, "warmup", o.warmup);
    else
        hpc_kv_str(&rep, "warmup", "repetitions/10, at least min(10, repetitions)");
    hpc_kv_num(&rep, "off_cache_mb", o.off_cache);
    hpc_kv_bool(&rep, "sync", o.sync);
    hpc_kv_bool(&rep, "check_payload", o.check);
    list[0] = '\0';
    for (int k = 0; k < o.norders; k++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? "," : "", ORDER_NAME[o.order[k]]);
    hpc_kv_str(&rep, "orders", list);
    hpc_kv_int(&rep, "nodes", nnodes);
    hpc_kv_int(&rep, "rounds", o.rounds);
    hpc_kv_bool(&rep, "mpi_t", mpit);
    if (*gate.name) {
        snprintf(list, sizeof list, "%s=%lld%s%s%s", gate.name, gate.value, *gate.text ? " (" : "", gate.text,
                 *gate.text ? ")" : "");
        hpc_kv_str(&rep, "algorithm_gate", list);
    } else
        hpc_kv_str(&rep, "algorithm_gate", NULL);
    for (int v = 0; v < o.nvariants; v++) {
        char key[48];
        snprintf(key, sizeof key, "variant[%d]", v);
        hpc_kv_str(&rep, key, o.variant[v].label);
        for (int k = 0; k < o.nops; k++) {
            const hpc_cvar_said *sd = &said[v][o.op[k]];
            const char *f = fn[v][o.op[k]];
            snprintf(key, sizeof key, "algorithm[%d.%s]", v, OP_NAME[o.op[k]]);
            if (!*sd->name && !*f) {
                hpc_kv_str(&rep, key, NULL);
                continue;
            }
            char text[400] = "";
            if (*sd->name)
                snprintf(text, sizeof text, "%s=%lld%s%s%s", sd->name, sd->value, *sd->text ? " (" : "", sd->text,
                         *sd->text ? ")" : "");
            if (*f) snprintf(text + strlen(text), sizeof text - strlen(text), "%sfunction %s", *text ? "; " : "", f);
            hpc_kv_str(&rep, key, text);
        }
    }
    hpc_report_placement(&rep, 0);
    hpc_report_header(&rep);

    char msg[256];
    snprintf(msg, sizeof msg, "%lld result elements differ from what the operation must deliver", wrong_all);
    hpc_report_validation(&rep, wrong_all == 0, msg);

    hpc_json res;
    js_init(&res);
    if (rank == 0) {
        printf("%-10s %-7s %8s %6s %12s %12s %8s %14s %14s %14s\n", "#op", "#order", "#variant", "#round", "#bytes",
               "#repetitions", "#warmup", "t_min[usec]", "t_max[usec]", "t_avg[usec]");
        js_obj_open(&res, NULL);
        js_arr_open(&res, "ops");
        for (int k = 0; k < o.nops; k++) js_str(&res, NULL, OP_NAME[o.op[k]]);
        js_arr_close(&res);
        js_arr_open(&res, "sizes");
        for (int s = 0; s < o.nsizes; s++) js_int(&res, NULL, o.sizes[s]);
        js_arr_close(&res);
        js_arr_open(&res, "orders");
        for (int k = 0; k < o.norders; k++) js_str(&res, NULL, ORDER_NAME[o.order[k]]);
        js_arr_close(&res);
        js_int(&res, "nodes", nnodes);
        js_int(&res, "rounds", o.rounds);
        js_bool(&res, "sync", o.sync);
        js_num(&res, "off_cache_mb", o.off_cache);
        js_bool(&res, "check_payload", o.check);
        js_obj_open(&res, "gate");
        js_str(&res, "cvar", *gate.name ? gate.name : NULL);
        if (*gate.name) js_int(&res, "value", gate.value); else js_null(&res, "value");
        js_str(&res, "name", *gate.text ? gate.text : NULL);
        js_obj_close(&res);
        js_arr_open(&res, "variants");
        for (int v = 0; v < o.nvariants; v++) {
            js_obj_open(&res, NULL);
            js_str(&res, "label", o.variant[v].label);
            js_obj_open(&res, "writes");
            for (int w = 0; w < o.variant[v].nwrites; w++) js_int(&res, o.variant[v].writes[w].name, o.variant[v].writes[w].value);
            js_obj_close(&res);
            js_obj_open(&res, "said");
            for (int k = 0; k < o.nops; k++) {
                const hpc_cvar_said *sd = &said[v][o.op[k]];
                js_obj_open(&res, OP_NAME[o.op[k]]);
                js_str(&res, "cvar", *sd->name ? sd->name : NULL);
                if (*sd->name) js_int(&res, "value", sd->value); else js_null(&res, "value");
                js_str(&res, "name", *sd->text ? sd->text : NULL);
                js_str(&res, "function", *fn[v][o.op[k]] ? fn[v][o.op[k]] : NULL);
                js_obj_close(&res);
            }
            js_obj_close(&res);
            js_obj_close(&res);
        }
        js_arr_close(&res);
        js_arr_open(&res, "rows");
        for (size_t i = 0; i < at; i++) {
            const row *w = &rows[i];
            printf("%-10s %-7s %8d %6d %12lld %12lld %8lld %14.2f %14.2f %14.2f\n", OP_NAME[w->op], ORDER_NAME[w->order],
                   w->variant, w->round, w->bytes, w->reps, w->warm, w->tmin, w->tmax, w->tavg);
            js_obj_open(&res, NULL);
            js_str(&res, "op", OP_NAME[w->op]);
            js_str(&res, "order", ORDER_NAME[w->order]);
            js_int(&res, "variant", w->variant);
            js_int(&res, "round", w->round);
            js_int(&res, "bytes", w->bytes);
            js_int(&res, "repetitions", w->reps);
            js_int(&res, "warmup", w->warm);
            js_num(&res, "t_min_usec", w->tmin);
            js_num(&res, "t_max_usec", w->tmax);
            js_num(&res, "t_avg_usec", w->tavg);
            js_obj_close(&res);
        }
        js_arr_close(&res);
        js_obj_close(&res);
        fflush(stdout);
    }
    int code = hpc_report_finish(&rep, res.buf);
    js_free(&res);
    for (int v = 0; v < o.nvariants; v++)
        for (int k = 0; k < o.norders; k++) MPI_Comm_free(&comm[v][k]);
    hpc_mpit_stop();
    free(rows);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return code;
}
