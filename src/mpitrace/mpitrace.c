/* mpitrace.c - a PMPI tracer: wraps the MPI calls the course uses, records one fixed-size
 * record per call into a per-rank buffer and writes it to $MPITRACE_DIR/rank-NNNNNN.mpit.
 *
 * Use it with LD_PRELOAD=build/lib/libmpitrace.so (or link -lmpitrace). FORMAT.md describes
 * the file; hpclab/trace/load.py reads it. Only C bindings are wrapped: Open MPI's Fortran
 * bindings call PMPI_ directly, so Fortran programs are not traced.
 *
 * Clock: CLOCK_MONOTONIC. It never jumps (NTP only slews its rate), so the offset between two
 * ranks' clocks changes smoothly and two ping-pong estimates (at Init and at Finalize) with
 * linear interpolation between them describe it; CLOCK_REALTIME can be stepped by NTP in the
 * middle of a run, which no interpolation repairs. Its origin (boot time) differs between
 * hosts, which does not matter because the offset is measured, not assumed.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "mpitrace.h"
#include "table.h"

#ifndef MT_DEFAULT_BUFFER
#define MT_DEFAULT_BUFFER 65536 /* records per rank buffer (72 B each): 4.5 MiB, few flushes */
#endif
#ifndef MT_DEFAULT_SYNC_ROUNDS
#define MT_DEFAULT_SYNC_ROUNDS 20 /* ping-pongs per rank and sync; the fastest one is kept */
#endif
#define MT_STACK_REQS 32 /* Wait/Test arrays up to this size are copied on the stack */

_Static_assert(sizeof(MPI_Request) <= 8 && sizeof(MPI_Comm) <= 8, "handles fit in 64 bits");

typedef struct {
    MPI_Comm handle;
    int32_t id;  /* -1: a communicator the tracer did not see being created */
    int size;    /* size of the group peers refer to (remote group for intercomms) */
    int *world;  /* world rank of each group rank; NULL means identity (COMM_WORLD) */
} mt_comm;

static struct {
    int on;  /* between a successful Init and Finalize */
    int rank, size, threaded;
    pthread_mutex_t lock;
    mt_record *buf;
    size_t nbuf, cap;
    int fd;
    int64_t nwritten;
    uint32_t seq;
    int32_t next_req;
    int64_t next_comm_base;
    mt_table reqs;   /* MPI_Request -> id | kind << 32 | comm index << 33 */
    mt_table comms;  /* MPI_Comm -> index into comm[] */
    mt_table names;  /* const char* -> string id (a cache; content is rechecked) */
    mt_comm *comm;
    int ncomm, capcomm;
    char **str;
    int nstr, capstr;
    MPI_Comm sync_comm;
    mt_header hdr;
    char path[4096];
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

#define LOCK() do { if (S.threaded) pthread_mutex_lock(&S.lock); } while (0)
#define UNLOCK() do { if (S.threaded) pthread_mutex_unlock(&S.lock); } while (0)

static inline int64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the calling thread, in ns: how long this rank actually ran.
 *
 * CLOCK_THREAD_CPUTIME_ID, not CLOCK_PROCESS_CPUTIME_ID. The replay needs, per compute burst,
 * how long the burst would take on a dedicated core. The process clock sums every thread of
 * the process: a burst in which 4 OpenMP threads compute for 1 s reads 4 s, and it also
 * counts helper threads (Open MPI's and PMIx's progress and listener threads). The calling
 * thread's clock reads about 1 s: the master thread takes part in every parallel region and
 * waits at its closing barrier for the others (spinning, hence counted, under libgomp's
 * default wait policy). What it cannot see: a worker thread switched out while the master
 * spins for it counts as running. With MPI_THREAD_MULTIPLE each event carries the clock of
 * the thread that made the call (the stamps below are per thread), so a burst between calls
 * of two threads means little; the course's programs call MPI from one thread. */
static inline int64_t cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#ifndef MT_DEFAULT_CPU_INTERVAL
/* ns of wall time between two reads of the CPU clock (MPITRACE_CPU_INTERVAL_NS; 0 = every
 * stamp). Well below a scheduler time slice (milliseconds), so a rank switched out for a
 * slice is always seen; well above the read's cost (a system call: 0.3-1.3 us on the
 * course's VM, against 0.05 us for the wall clock), so it stays far below 1 % of the run. */
#define MT_DEFAULT_CPU_INTERVAL 100000
#endif
static int64_t cpu_interval = MT_DEFAULT_CPU_INTERVAL;

/* Wall and CPU time of one call boundary. Linux has no vDSO for CPU clocks: reading one at
 * every entry and exit cost 2 us per event here, twice the goal. So the CPU clock is read
 * only when cpu_interval of wall time has passed since the last read; in between the rank is
 * taken to have run all the time since the last stamp (CPU advances with the wall clock).
 * A switch-out of cpu_interval or longer makes the next stamp come after a read, so it is
 * counted; shorter ones (interrupts, a short wakeup of another task) count as running, as
 * they did in wall time. Each stamp's CPU time is kept between the last one's and the last
 * one's plus the wall time since, so CPU time never decreases and a burst never shows more
 * CPU than wall time. */
typedef struct {
    int64_t wall, cpu;
} mt_stamp;

static __thread struct {
    int init;
    int64_t w_last, c_last, w_read;
} TS;

static inline mt_stamp stamp(void)
{
    mt_stamp s;
    s.wall = now();
    int64_t dw = s.wall - TS.w_last;
    if (!TS.init || s.wall - TS.w_read >= cpu_interval) {
        int64_t c = cpu_now();
        TS.w_read = s.wall;
        if (!TS.init)
            s.cpu = c;
        else
            s.cpu = c < TS.c_last ? TS.c_last : (c > TS.c_last + dw ? TS.c_last + dw : c);
        TS.init = 1;
    } else {
        s.cpu = TS.c_last + dw;
    }
    TS.w_last = s.wall;
    TS.c_last = s.cpu;
    return s;
}

#define stamp_enter stamp
#define stamp_exit stamp

static inline uint64_t key_of(const void *handle, size_t n)
{
    uint64_t k = 0;
    memcpy(&k, handle, n);
    return k;
}

/* ---------------------------------------------------------------- file and buffer */

static void write_header(void)
{
    S.hdr.nrecords = S.nwritten;
    if (pwrite(S.fd, &S.hdr, sizeof S.hdr, 0) != (ssize_t)sizeof S.hdr)
        fprintf(stderr, "mpitrace: rank %d: cannot write header of %s: %s\n", S.rank, S.path,
                strerror(errno));
}

static void flush_buffer(void)
{
    if (S.fd < 0 || S.nbuf == 0)
        return;
    const char *p = (const char *)S.buf;
    size_t left = S.nbuf * sizeof(mt_record);
    while (left > 0) {
        ssize_t w = write(S.fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "mpitrace: rank %d: writing %s failed: %s; tracing stops\n", S.rank,
                    S.path, strerror(errno));
            close(S.fd);
            S.fd = -1;
            S.on = 0;
            return;
        }
        p += w;
        left -= (size_t)w;
    }
    S.nwritten += (int64_t)S.nbuf;
    S.nbuf = 0;
    /* Keep the header's record count current, so a crashed run's file still says how much
     * of it is whole. */
    write_header();
}

static mt_record *next_record(void);

static void flush_with_event(void)
{
    mt_stamp t0 = stamp_enter();
    flush_buffer();
    if (!S.on)
        return;
    mt_stamp t1 = stamp_exit();
    mt_record *r = next_record();
    r->call = MT_FLUSH;
    r->seq = S.seq++;
    r->t_enter = t0.wall;
    r->t_exit = t1.wall;
    r->cpu_enter = t0.cpu;
    r->cpu_exit = t1.cpu;
}

/* The next free slot, cleared to "no value" defaults; flushes when the buffer is full. */
static mt_record *next_record(void)
{
    if (S.nbuf == S.cap)
        flush_buffer();
    mt_record *r = &S.buf[S.nbuf++];
    memset(r, 0, sizeof *r);
    r->peer = r->tag = r->comm = r->req = r->aux = -1;
    return r;
}

/* Make room for n records written together (an event and its extras, or a definition and
 * its chunks), flushing first if they would not fit. Flushing here, between events, records
 * the flush as an event; a flush inside a group (next_record) could not be, and would leave
 * the tracer's cost invisible. Only a group larger than the whole buffer is still split. */
static void reserve(size_t n)
{
    if (S.nbuf > 0 && S.nbuf + n > S.cap)
        flush_with_event();
}

/* An event record followed by `extra` records the caller writes next. */
static mt_record *event_x(uint16_t call, mt_stamp t0, mt_stamp t1, size_t extra)
{
    reserve(1 + extra);
    mt_record *r = next_record();
    r->call = call;
    r->seq = S.seq++;
    r->t_enter = t0.wall;
    r->t_exit = t1.wall;
    r->cpu_enter = t0.cpu;
    r->cpu_exit = t1.cpu;
    return r;
}

static mt_record *event(uint16_t call, mt_stamp t0, mt_stamp t1) { return event_x(call, t0, t1, 0); }

/* A definition record followed by its payload in chunks of MT_RECORD_SIZE - 2 bytes. */
static void definition(uint16_t call, int32_t id, int32_t n, const void *data, size_t len)
{
    size_t per = MT_RECORD_SIZE - 2, chunks = (len + per - 1) / per;
    reserve(1 + chunks);
    mt_record *r = next_record();
    r->call = call;
    r->seq = S.seq;
    r->nextra = (uint16_t)chunks;
    r->bytes = (int64_t)len;
    if (call == MT_DEF_STRING)
        r->aux = id;
    else
        r->comm = id;
    r->peer = n;
    for (size_t c = 0; c < chunks; c++) {
        unsigned char *p = (unsigned char *)next_record();
        memset(p, 0, MT_RECORD_SIZE);
        uint16_t code = MT_CHUNK;
        memcpy(p, &code, 2);
        size_t take = len - c * per < per ? len - c * per : per;
        memcpy(p + 2, (const char *)data + c * per, take);
    }
}

/* ---------------------------------------------------------------- communicators */

static int add_comm(MPI_Comm c, int32_t id)
{
    if (S.ncomm == S.capcomm) {
        int cap = S.capcomm ? 2 * S.capcomm : 16;
        mt_comm *m = realloc(S.comm, (size_t)cap * sizeof *m);
        if (!m)
            return 0; /* out of memory: fall back to the world entry */
        S.comm = m;
        S.capcomm = cap;
    }
    mt_comm *e = &S.comm[S.ncomm];
    e->handle = c;
    e->id = id;
    e->world = NULL;
    int inter = 0;
    PMPI_Comm_test_inter(c, &inter);
    MPI_Group g, wg;
    if (inter)
        PMPI_Comm_remote_group(c, &g);
    else
        PMPI_Comm_group(c, &g);
    PMPI_Group_size(g, &e->size);
    if (c != MPI_COMM_WORLD) {
        int *in = malloc((size_t)e->size * sizeof(int));
        e->world = malloc((size_t)e->size * sizeof(int));
        if (!in || !e->world) {
            free(in);
            free(e->world);
            PMPI_Group_free(&g);
            return 0;
        }
        for (int i = 0; i < e->size; i++)
            in[i] = i;
        PMPI_Comm_group(MPI_COMM_WORLD, &wg);
        PMPI_Group_translate_ranks(g, e->size, in, wg, e->world);
        PMPI_Group_free(&wg);
        free(in);
    }
    PMPI_Group_free(&g);
    mt_table_put(&S.comms, key_of(&c, sizeof c), S.ncomm);
    if (id >= 0) {
        int *ranks = e->world;
        int *ident = NULL;
        if (!ranks) {
            ident = malloc((size_t)e->size * sizeof(int));
            for (int i = 0; ident && i < e->size; i++)
                ident[i] = i;
            ranks = ident;
        }
        if (ranks)
            definition(MT_DEF_COMM, id, e->size, ranks, (size_t)e->size * sizeof(int));
        free(ident);
    }
    return S.ncomm++;
}

/* Index of a communicator in comm[]; one the tracer has not seen is added as untracked. */
static inline int comm_index(MPI_Comm c)
{
    if (c == MPI_COMM_WORLD)
        return 0;
    int64_t v;
    if (mt_table_get(&S.comms, key_of(&c, sizeof c), &v))
        return (int)v;
    return add_comm(c, -1);
}

static inline int32_t world_of(int ci, int r)
{
    if (r == MPI_PROC_NULL)
        return MT_PEER_PROC_NULL;
    if (r == MPI_ANY_SOURCE)
        return MT_PEER_ANY;
    const mt_comm *e = &S.comm[ci];
    if (r < 0 || r >= e->size)
        return MT_PEER_NONE;
    return e->world ? e->world[r] : r;
}

/* After a collective that created *newcomm from parent: agree on an id with every rank of
 * parent (so both ends of a message name the communicator alike) and register it.
 * Ids are base + world rank of the new communicator's rank 0, base being the largest
 * "next free" of the parent's ranks; all bases are multiples of the world size, hence two
 * communicators never share an id. */
static void comm_created(MPI_Comm parent, MPI_Comm newcomm)
{
    int inter = 0;
    PMPI_Comm_test_inter(parent, &inter);
    if (inter) {
        if (newcomm != MPI_COMM_NULL)
            comm_index(newcomm);
        return;
    }
    long long mine = S.next_comm_base, base = 0;
    PMPI_Allreduce(&mine, &base, 1, MPI_LONG_LONG, MPI_MAX, parent);
    S.next_comm_base = base + S.size;
    if (newcomm == MPI_COMM_NULL)
        return;
    int ci = add_comm(newcomm, -1);
    int32_t leader = world_of(ci, 0);
    long long id = base + leader;
    if (id > INT32_MAX)
        return; /* stays untracked */
    S.comm[ci].id = (int32_t)id;
    int32_t n = S.comm[ci].size;
    definition(MT_DEF_COMM, (int32_t)id, n, S.comm[ci].world, (size_t)n * sizeof(int));
}

/* ---------------------------------------------------------------- requests */

static inline int32_t new_request(MPI_Request h, int kind, int ci)
{
    if (h == MPI_REQUEST_NULL)
        return -1;
    int32_t id = S.next_req++;
    int64_t v = (int64_t)(uint32_t)id | ((int64_t)kind << 32) | ((int64_t)ci << 33);
    mt_table_add(&S.reqs, key_of(&h, sizeof h), v);
    return id;
}

static inline int known_request(MPI_Request h)
{
    int64_t v;
    return h != MPI_REQUEST_NULL && mt_table_get(&S.reqs, key_of(&h, sizeof h), &v);
}

static inline int64_t matched_bytes(const MPI_Status *st)
{
    int n = 0;
    PMPI_Get_count(st, MPI_BYTE, &n);
    return n == MPI_UNDEFINED ? -1 : n;
}

/* Writes the completion record of request h (which MPI has completed) and forgets it. */
static void completed(MPI_Request h, uint32_t seq, const MPI_Status *st)
{
    int64_t v;
    if (h == MPI_REQUEST_NULL || !mt_table_take(&S.reqs, key_of(&h, sizeof h), &v))
        return;
    mt_record *r = next_record();
    r->call = MT_X_COMPLETE;
    r->seq = seq;
    r->req = (int32_t)(uint32_t)(v & 0xffffffff);
    int kind = (int)((v >> 32) & 1);
    r->aux = kind;
    if (kind == MT_KIND_RECV) {
        r->peer = world_of((int)(v >> 33), st->MPI_SOURCE);
        r->tag = st->MPI_TAG;
        r->bytes = matched_bytes(st);
        r->comm = S.comm[v >> 33].id;
    }
}

/* ---------------------------------------------------------------- setup and teardown */

static void clock_sync(mt_sync *out)
{
    char *env = getenv("MPITRACE_SYNC_ROUNDS");
    int rounds = env ? atoi(env) : MT_DEFAULT_SYNC_ROUNDS;
    if (rounds < 1)
        rounds = 1;
    memset(out, 0, sizeof *out);
    out->rounds = rounds;
    out->valid = 1;
    if (S.rank == 0) {
        /* Rank 0 is the reference clock: it answers each rank in turn with its time. */
        for (int r = 1; r < S.size; r++)
            for (int k = 0; k < rounds; k++) {
                int64_t t;
                PMPI_Recv(&t, 1, MPI_INT64_T, r, 0, S.sync_comm, MPI_STATUS_IGNORE);
                t = now();
                PMPI_Send(&t, 1, MPI_INT64_T, r, 0, S.sync_comm);
            }
        out->t_local = now();
        return;
    }
    out->rtt = INT64_MAX;
    for (int k = 0; k < rounds; k++) {
        int64_t t1 = now(), t0;
        PMPI_Send(&t1, 1, MPI_INT64_T, 0, 0, S.sync_comm);
        PMPI_Recv(&t0, 1, MPI_INT64_T, 0, 0, S.sync_comm, MPI_STATUS_IGNORE);
        int64_t t2 = now();
        /* Assume the reply took half the round trip: rank 0 read its clock at (t1+t2)/2. */
        if (t2 - t1 < out->rtt) {
            out->rtt = t2 - t1;
            out->t_local = t1 + (t2 - t1) / 2;
            out->offset = t0 - out->t_local;
        }
    }
}

static void finish(uint32_t flag)
{
    flush_buffer();
    if (S.fd >= 0) {
        S.hdr.flags |= flag;
        write_header();
        close(S.fd);
        S.fd = -1;
    }
    S.on = 0;
}

static void at_exit(void)
{
    /* The program ended without MPI_Finalize: keep what was recorded. */
    if (S.on)
        finish(MT_FLAG_ATEXIT);
}

static int make_dirs(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return (mkdir(tmp, 0777) != 0 && errno != EEXIST) ? -1 : 0;
}

/* Returns 1 when this rank's file is open and its first state is in place. */
static int open_rank_file(void)
{
    const char *dir = getenv("MPITRACE_DIR");
    if (!dir || !*dir)
        dir = "mpitrace";
    if (make_dirs(dir) != 0) {
        fprintf(stderr, "mpitrace: rank %d: cannot create folder %s: %s\n", S.rank, dir,
                strerror(errno));
        return 0;
    }
    snprintf(S.path, sizeof S.path, "%s/rank-%06d.mpit", dir, S.rank);
    /* O_EXCL: an earlier run's trace is never overwritten. */
    S.fd = open(S.path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (S.fd < 0) {
        fprintf(stderr, "mpitrace: rank %d: cannot create %s: %s (point MPITRACE_DIR at a new "
                "folder)\n", S.rank, S.path, strerror(errno));
        return 0;
    }
    return 1;
}

static void start(uint16_t call, mt_stamp t0, mt_stamp t1, int level)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &S.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &S.size);
    S.threaded = (level == MPI_THREAD_MULTIPLE);
    char *cpu_env = getenv("MPITRACE_CPU_INTERVAL_NS");
    if (cpu_env && *cpu_env)
        cpu_interval = atoll(cpu_env) < 0 ? 0 : atoll(cpu_env);
    char *env = getenv("MPITRACE_BUFFER_RECORDS");
    long cap = env ? atol(env) : MT_DEFAULT_BUFFER;
    S.cap = cap < 64 ? 64 : (size_t)cap; /* room for an event and its first extras */
    S.buf = malloc(S.cap * sizeof(mt_record));
    int ok = S.buf && mt_table_init(&S.reqs, 8) == 0 && mt_table_init(&S.comms, 4) == 0 &&
             mt_table_init(&S.names, 4) == 0;
    PMPI_Comm_dup(MPI_COMM_WORLD, &S.sync_comm);
    ok = ok && open_rank_file();
    /* Trace on every rank or on none: the tracer adds collectives of its own when
     * communicators are created, and those must happen everywhere or nowhere. */
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, S.sync_comm);
    if (!all) {
        if (S.fd >= 0) {
            close(S.fd);
            unlink(S.path);
            S.fd = -1;
        }
        if (S.rank == 0)
            fprintf(stderr, "mpitrace: tracing is off for this run (see the messages above)\n");
        PMPI_Comm_free(&S.sync_comm);
        return;
    }
    memcpy(S.hdr.magic, MT_MAGIC, 8);
    S.hdr.version = MT_VERSION;
    S.hdr.header_size = MT_HEADER_SIZE;
    S.hdr.record_size = MT_RECORD_SIZE;
    S.hdr.rank = S.rank;
    S.hdr.size = S.size;
    S.hdr.clock_id = CLOCK_MONOTONIC;
    S.hdr.cpu_clock_id = CLOCK_THREAD_CPUTIME_ID;
    S.hdr.cpu_interval = cpu_interval;
    S.hdr.thread_level = level;
    S.hdr.pid = getpid();
    S.hdr.nrecords = -1;
    gethostname(S.hdr.host, MT_HOST_LEN - 1);
    clock_sync(&S.hdr.sync_init);
    write_header();
    lseek(S.fd, MT_HEADER_SIZE, SEEK_SET);
    S.on = 1;
    S.next_comm_base = 2 * (int64_t)S.size; /* ids below: world (0) and self (size + rank) */
    add_comm(MPI_COMM_WORLD, 0);
    add_comm(MPI_COMM_SELF, S.size + S.rank);
    event(call, t0, t1)->aux = level;
    atexit(at_exit);
}

/* ---------------------------------------------------------------- user regions */

static int32_t intern(const char *name)
{
    int64_t v;
    uint64_t k = (uint64_t)(uintptr_t)name;
    /* Same pointer as before is the common case; the content is rechecked in case the
     * caller reuses a buffer for a different name. */
    if (mt_table_get(&S.names, k, &v) && strcmp(S.str[v], name) == 0)
        return (int32_t)v;
    for (int i = 0; i < S.nstr; i++)
        if (strcmp(S.str[i], name) == 0) {
            mt_table_put(&S.names, k, i);
            return i;
        }
    if (S.nstr == S.capstr) {
        int cap = S.capstr ? 2 * S.capstr : 16;
        char **s = realloc(S.str, (size_t)cap * sizeof *s);
        if (!s)
            return -1;
        S.str = s;
        S.capstr = cap;
    }
    S.str[S.nstr] = strdup(name);
    if (!S.str[S.nstr])
        return -1;
    definition(MT_DEF_STRING, S.nstr, 0, name, strlen(name));
    mt_table_put(&S.names, k, S.nstr);
    return S.nstr++;
}

static void region(uint16_t call, const char *name)
{
    if (!S.on || !name)
        return;
    mt_stamp t = stamp();
    LOCK();
    int32_t id = intern(name);
    event(call, t, t)->aux = id;
    UNLOCK();
}

void mpitrace_begin(const char *name) { region(MT_REGION_BEGIN, name); }
void mpitrace_end(const char *name) { region(MT_REGION_END, name); }

void mpitrace_flush(void)
{
    if (!S.on)
        return;
    LOCK();
    flush_with_event();
    UNLOCK();
}

/* ---------------------------------------------------------------- wrappers */

static inline int64_t type_bytes(int count, MPI_Datatype dt)
{
    int sz = 0;
    PMPI_Type_size(dt, &sz);
    return (int64_t)count * sz;
}

int MPI_Init(int *argc, char ***argv)
{
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Init(argc, argv);
    mt_stamp t1 = stamp_exit();
    if (rc == MPI_SUCCESS)
        start(MT_INIT, t0, t1, MPI_THREAD_SINGLE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    mt_stamp t1 = stamp_exit();
    if (rc == MPI_SUCCESS)
        start(MT_INIT_THREAD, t0, t1, *provided);
    return rc;
}

int MPI_Finalize(void)
{
    if (!S.on)
        return PMPI_Finalize();
    clock_sync(&S.hdr.sync_final);
    PMPI_Comm_free(&S.sync_comm);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Finalize();
    mt_stamp t1 = stamp_exit();
    LOCK();
    event(MT_FINALIZE, t0, t1);
    finish(MT_FLAG_FINALIZED);
    UNLOCK();
    return rc;
}

static int p2p_send(uint16_t call, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                    MPI_Comm comm, MPI_Request *req, int rc, mt_stamp t0)
{
    mt_stamp t1 = stamp_exit();
    LOCK();
    int ci = comm_index(comm);
    mt_record *r = event(call, t0, t1);
    r->peer = world_of(ci, dest);
    r->tag = tag;
    r->comm = S.comm[ci].id;
    r->bytes = dest == MPI_PROC_NULL ? 0 : type_bytes(count, dt);
    if (req && rc == MPI_SUCCESS)
        r->req = new_request(*req, MT_KIND_SEND, ci);
    UNLOCK();
    (void)buf;
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Send(buf, count, dt, dest, tag, comm);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Send(buf, count, dt, dest, tag, comm);
    return p2p_send(MT_SEND, buf, count, dt, dest, tag, comm, NULL, rc, t0);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Ssend(buf, count, dt, dest, tag, comm);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Ssend(buf, count, dt, dest, tag, comm);
    return p2p_send(MT_SSEND, buf, count, dt, dest, tag, comm, NULL, rc, t0);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    if (!S.on)
        return PMPI_Issend(buf, count, dt, dest, tag, comm, req);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Issend(buf, count, dt, dest, tag, comm, req);
    return p2p_send(MT_ISSEND, buf, count, dt, dest, tag, comm, req, rc, t0);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    if (!S.on)
        return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Isend(buf, count, dt, dest, tag, comm, req);
    return p2p_send(MT_ISEND, buf, count, dt, dest, tag, comm, req, rc, t0);
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    if (!S.on)
        return PMPI_Recv(buf, count, dt, source, tag, comm, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Recv(buf, count, dt, source, tag, comm, st);
    mt_stamp t1 = stamp_exit();
    LOCK();
    int ci = comm_index(comm);
    mt_record *r = event(MT_RECV, t0, t1);
    r->comm = S.comm[ci].id;
    if (rc == MPI_SUCCESS) {
        r->peer = world_of(ci, st->MPI_SOURCE);
        r->tag = st->MPI_TAG;
        r->bytes = matched_bytes(st);
    } else {
        r->peer = world_of(ci, source);
        r->tag = tag;
    }
    UNLOCK();
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    if (!S.on)
        return PMPI_Irecv(buf, count, dt, source, tag, comm, req);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Irecv(buf, count, dt, source, tag, comm, req);
    mt_stamp t1 = stamp_exit();
    LOCK();
    int ci = comm_index(comm);
    mt_record *r = event(MT_IRECV, t0, t1);
    /* As posted; the completion record carries the source, tag and size that matched. */
    r->peer = world_of(ci, source);
    r->tag = tag;
    r->comm = S.comm[ci].id;
    r->bytes = source == MPI_PROC_NULL ? 0 : type_bytes(count, dt);
    if (rc == MPI_SUCCESS)
        r->req = new_request(*req, MT_KIND_RECV, ci);
    UNLOCK();
    return rc;
}

static void sendrecv_record(uint16_t call, mt_stamp t0, int scount, MPI_Datatype sdt, int dest,
                            int stag, int source, int rtag, MPI_Comm comm, const MPI_Status *st,
                            int rc)
{
    mt_stamp t1 = stamp_exit();
    LOCK();
    int ci = comm_index(comm);
    mt_record *r = event_x(call, t0, t1, 1);
    r->peer = world_of(ci, dest);
    r->tag = stag;
    r->comm = S.comm[ci].id;
    r->bytes = dest == MPI_PROC_NULL ? 0 : type_bytes(scount, sdt);
    r->nextra = 1;
    uint32_t seq = r->seq;
    mt_record *x = next_record();
    x->call = MT_X_RECV;
    x->seq = seq;
    x->comm = S.comm[ci].id;
    if (rc == MPI_SUCCESS) {
        x->peer = world_of(ci, st->MPI_SOURCE);
        x->tag = st->MPI_TAG;
        x->bytes = matched_bytes(st);
    } else {
        x->peer = world_of(ci, source);
        x->tag = rtag;
    }
    UNLOCK();
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag, void *rbuf,
                 int rcount, MPI_Datatype rdt, int source, int rtag, MPI_Comm comm,
                 MPI_Status *status)
{
    if (!S.on)
        return PMPI_Sendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, source, rtag, comm,
                             status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Sendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, source, rtag, comm,
                           st);
    sendrecv_record(MT_SENDRECV, t0, scount, sdt, dest, stag, source, rtag, comm, st, rc);
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int source,
                         int rtag, MPI_Comm comm, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Sendrecv_replace(buf, count, dt, dest, stag, source, rtag, comm, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Sendrecv_replace(buf, count, dt, dest, stag, source, rtag, comm, st);
    sendrecv_record(MT_SENDRECV_REPLACE, t0, count, dt, dest, stag, source, rtag, comm, st, rc);
    return rc;
}

/* Wait/Test family. MPI sets completed requests to MPI_REQUEST_NULL, so the handles are
 * copied before the call; `done[i]` says which of them completed. */
static void completion_event(uint16_t call, mt_stamp t0, int n, const MPI_Request *before,
                             const int *done, const MPI_Status *st, int rc)
{
    mt_stamp t1 = stamp_exit();
    LOCK();
    int k = 0;
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < n; i++)
            k += done[i] && known_request(before[i]);
    mt_record *r = event_x(call, t0, t1, (size_t)(k > 65535 ? 65535 : k));
    r->nextra = (uint16_t)(k > 65535 ? 65535 : k);
    r->aux = n;
    uint32_t seq = r->seq;
    int written = 0;
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < n && written < 65535; i++)
            if (done[i] && known_request(before[i])) {
                completed(before[i], seq, &st[i]);
                written++;
            }
    UNLOCK();
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Wait(req, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    MPI_Request before = *req;
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Wait(req, st);
    int done = 1;
    completion_event(MT_WAIT, t0, 1, &before, &done, st, rc);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    if (!S.on)
        return PMPI_Test(req, flag, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    MPI_Request before = *req;
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Test(req, flag, st);
    int done = *flag;
    completion_event(MT_TEST, t0, 1, &before, &done, st, rc);
    return rc;
}

/* Scratch for the array calls: on the stack when small. */
typedef struct {
    MPI_Request sreq[MT_STACK_REQS];
    MPI_Status sst[MT_STACK_REQS];
    int sdone[MT_STACK_REQS];
    MPI_Request *req;
    MPI_Status *st;
    int *done;
} scratch;

static int scratch_get(scratch *s, int n, MPI_Status *user)
{
    if (n <= MT_STACK_REQS) {
        s->req = s->sreq;
        s->st = s->sst;
        s->done = s->sdone;
    } else {
        s->req = malloc((size_t)n * sizeof(MPI_Request));
        s->st = malloc((size_t)n * sizeof(MPI_Status));
        s->done = malloc((size_t)n * sizeof(int));
        if (!s->req || !s->st || !s->done) {
            free(s->req);
            free(s->st);
            free(s->done);
            return 0;
        }
    }
    if (user != MPI_STATUSES_IGNORE)
        s->st = user;
    return 1;
}

static void scratch_put(scratch *s, int n, MPI_Status *user)
{
    if (n > MT_STACK_REQS) {
        free(s->req);
        if (user == MPI_STATUSES_IGNORE)
            free(s->st);
        free(s->done);
    }
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    scratch s;
    if (!S.on || n < 0 || !scratch_get(&s, n, sts))
        return PMPI_Waitall(n, reqs, sts);
    memcpy(s.req, reqs, (size_t)n * sizeof(MPI_Request));
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Waitall(n, reqs, s.st);
    for (int i = 0; i < n; i++)
        s.done[i] = 1;
    completion_event(MT_WAITALL, t0, n, s.req, s.done, s.st, rc);
    scratch_put(&s, n, sts);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    scratch s;
    if (!S.on || n < 0 || !scratch_get(&s, n, sts))
        return PMPI_Testall(n, reqs, flag, sts);
    memcpy(s.req, reqs, (size_t)n * sizeof(MPI_Request));
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Testall(n, reqs, flag, s.st);
    for (int i = 0; i < n; i++)
        s.done[i] = *flag;
    completion_event(MT_TESTALL, t0, n, s.req, s.done, s.st, rc);
    scratch_put(&s, n, sts);
    return rc;
}

static int any_call(uint16_t call, int n, MPI_Request reqs[], int *index, int *flag,
                    MPI_Status *status)
{
    scratch s;
    if (!scratch_get(&s, n, MPI_STATUSES_IGNORE))
        return call == MT_WAITANY ? PMPI_Waitany(n, reqs, index, status)
                                  : PMPI_Testany(n, reqs, index, flag, status);
    memcpy(s.req, reqs, (size_t)n * sizeof(MPI_Request));
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    mt_stamp t0 = stamp_enter();
    int rc = call == MT_WAITANY ? PMPI_Waitany(n, reqs, index, st)
                                : PMPI_Testany(n, reqs, index, flag, st);
    int hit = (call == MT_WAITANY || *flag) && *index != MPI_UNDEFINED;
    for (int i = 0; i < n; i++)
        s.done[i] = hit && i == *index;
    if (hit)
        s.st[*index] = *st;
    completion_event(call, t0, n, s.req, s.done, s.st, rc);
    scratch_put(&s, n, MPI_STATUSES_IGNORE);
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    if (!S.on || n < 0)
        return PMPI_Waitany(n, reqs, index, status);
    return any_call(MT_WAITANY, n, reqs, index, NULL, status);
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    if (!S.on || n < 0)
        return PMPI_Testany(n, reqs, index, flag, status);
    return any_call(MT_TESTANY, n, reqs, index, flag, status);
}

static int some_call(uint16_t call, int n, MPI_Request reqs[], int *outcount, int idx[],
                     MPI_Status sts[])
{
    scratch s;
    if (!scratch_get(&s, n, MPI_STATUSES_IGNORE))
        return call == MT_WAITSOME ? PMPI_Waitsome(n, reqs, outcount, idx, sts)
                                   : PMPI_Testsome(n, reqs, outcount, idx, sts);
    memcpy(s.req, reqs, (size_t)n * sizeof(MPI_Request));
    MPI_Status *out = sts == MPI_STATUSES_IGNORE ? s.st : sts;
    mt_stamp t0 = stamp_enter();
    int rc = call == MT_WAITSOME ? PMPI_Waitsome(n, reqs, outcount, idx, out)
                                 : PMPI_Testsome(n, reqs, outcount, idx, out);
    /* Statuses come back packed (status j belongs to request idx[j]): spread them out. */
    MPI_Status *byreq = malloc((size_t)(n > 0 ? n : 1) * sizeof(MPI_Status));
    for (int i = 0; i < n; i++)
        s.done[i] = 0;
    if (byreq && rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        for (int j = 0; j < *outcount; j++) {
            s.done[idx[j]] = 1;
            byreq[idx[j]] = out[j];
        }
    completion_event(call, t0, n, s.req, s.done, byreq ? byreq : out, byreq ? rc : -1);
    free(byreq);
    scratch_put(&s, n, MPI_STATUSES_IGNORE);
    return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[])
{
    if (!S.on || n < 0)
        return PMPI_Waitsome(n, reqs, outcount, idx, sts);
    return some_call(MT_WAITSOME, n, reqs, outcount, idx, sts);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[])
{
    if (!S.on || n < 0)
        return PMPI_Testsome(n, reqs, outcount, idx, sts);
    return some_call(MT_TESTSOME, n, reqs, outcount, idx, sts);
}

int MPI_Request_free(MPI_Request *req)
{
    if (!S.on)
        return PMPI_Request_free(req);
    MPI_Request before = *req;
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Request_free(req);
    mt_stamp t1 = stamp_exit();
    LOCK();
    int64_t v;
    mt_record *r = event(MT_REQUEST_FREE, t0, t1);
    if (before != MPI_REQUEST_NULL && mt_table_take(&S.reqs, key_of(&before, sizeof before), &v))
        r->req = (int32_t)(uint32_t)(v & 0xffffffff);
    UNLOCK();
    return rc;
}

static void collective(uint16_t call, mt_stamp t0, int64_t bytes, int root, MPI_Comm comm)
{
    mt_stamp t1 = stamp_exit();
    LOCK();
    int ci = comm_index(comm);
    mt_record *r = event(call, t0, t1);
    r->comm = S.comm[ci].id;
    r->bytes = bytes;
    if (root >= 0)
        r->aux = world_of(ci, root);
    UNLOCK();
}

int MPI_Barrier(MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Barrier(comm);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Barrier(comm);
    collective(MT_BARRIER, t0, 0, -1, comm);
    return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Bcast(buf, count, dt, root, comm);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Bcast(buf, count, dt, root, comm);
    collective(MT_BCAST, t0, type_bytes(count, dt), root, comm);
    return rc;
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
    collective(MT_REDUCE, t0, type_bytes(count, dt), root, comm);
    return rc;
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm)
{
    if (!S.on)
        return PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm);
    collective(MT_ALLREDUCE, t0, type_bytes(count, dt), -1, comm);
    return rc;
}

/* Communicator constructors: the event is written first (its time excludes the tracer's own
 * id agreement), then the new communicator's definition. */
static void creator(uint16_t call, mt_stamp t0, MPI_Comm parent, MPI_Comm newcomm, int rc)
{
    mt_stamp t1 = stamp_exit();
    LOCK();
    int ci = comm_index(parent);
    mt_record *r = event(call, t0, t1);
    r->comm = S.comm[ci].id;
    UNLOCK();
    if (rc != MPI_SUCCESS)
        return;
    comm_created(parent, newcomm);
}

int MPI_Cart_create(MPI_Comm old, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *cart)
{
    if (!S.on)
        return PMPI_Cart_create(old, ndims, dims, periods, reorder, cart);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Cart_create(old, ndims, dims, periods, reorder, cart);
    creator(MT_CART_CREATE, t0, old, *cart, rc);
    return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain[], MPI_Comm *sub)
{
    if (!S.on)
        return PMPI_Cart_sub(comm, remain, sub);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Cart_sub(comm, remain, sub);
    creator(MT_CART_SUB, t0, comm, *sub, rc);
    return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out)
{
    if (!S.on)
        return PMPI_Comm_split(comm, color, key, out);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Comm_split(comm, color, key, out);
    creator(MT_COMM_SPLIT, t0, comm, *out, rc);
    return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out)
{
    if (!S.on)
        return PMPI_Comm_split_type(comm, type, key, info, out);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Comm_split_type(comm, type, key, info, out);
    creator(MT_COMM_SPLIT_TYPE, t0, comm, *out, rc);
    return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out)
{
    if (!S.on)
        return PMPI_Comm_dup(comm, out);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Comm_dup(comm, out);
    creator(MT_COMM_DUP, t0, comm, *out, rc);
    return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *out)
{
    if (!S.on)
        return PMPI_Comm_create(comm, group, out);
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Comm_create(comm, group, out);
    creator(MT_COMM_CREATE, t0, comm, *out, rc);
    return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (!S.on)
        return PMPI_Comm_free(comm);
    MPI_Comm c = *comm;
    mt_stamp t0 = stamp_enter();
    int rc = PMPI_Comm_free(comm);
    mt_stamp t1 = stamp_exit();
    LOCK();
    int64_t v;
    mt_record *r = event(MT_COMM_FREE, t0, t1);
    /* MPI may hand the same handle to a later communicator: forget this one. */
    if (mt_table_take(&S.comms, key_of(&c, sizeof c), &v))
        r->comm = S.comm[v].id;
    UNLOCK();
    return rc;
}
