/* format.h - on-disk layout of an mpitrace rank file (version 2). FORMAT.md explains it.
 *
 * Every field is little-endian (the machines the course runs on). The Python loader
 * (hpclab/trace/load.py) mirrors these structs as numpy dtypes; tests/trace/test_load.py
 * checks that the call codes below and the loader's table agree.
 */
#ifndef MPITRACE_FORMAT_H
#define MPITRACE_FORMAT_H

#include <stdint.h>

#define MT_MAGIC "MPITRACE"
#define MT_VERSION 2 /* 2: CPU time at entry and exit of every event (records of 72 bytes) */
#define MT_HEADER_SIZE 512
#define MT_RECORD_SIZE 72
#define MT_HOST_LEN 256

/* Call codes. Keep in step with CALLS in hpclab/trace/load.py (a test checks). */
enum mt_call {
    MT_INIT = 1, MT_INIT_THREAD, MT_FINALIZE,
    MT_SEND, MT_RECV, MT_ISEND, MT_IRECV, MT_SENDRECV, MT_SENDRECV_REPLACE,
    MT_WAIT, MT_WAITALL, MT_WAITANY, MT_WAITSOME,
    MT_TEST, MT_TESTALL, MT_TESTANY, MT_TESTSOME,
    MT_BARRIER, MT_BCAST, MT_REDUCE, MT_ALLREDUCE,
    MT_CART_CREATE, MT_CART_SUB, MT_COMM_SPLIT, MT_COMM_SPLIT_TYPE, MT_COMM_DUP,
    MT_COMM_CREATE, MT_COMM_FREE, MT_REQUEST_FREE,
    MT_SSEND, MT_ISSEND,     /* synchronous sends: complete only once the receive has matched */
    MT_REGION_BEGIN = 100, MT_REGION_END,
    MT_FLUSH = 110,          /* the tracer writing its buffer: tracer cost made visible */
    /* Extra records: they follow the event they belong to (its `nextra` counts them). */
    MT_X_COMPLETE = 200,     /* one request completed by a Wait/Test event */
    MT_X_RECV = 201,         /* the receive side of a Sendrecv */
    /* Definition records: `nextra` payload chunks follow. */
    MT_DEF_STRING = 300,     /* aux = string id, bytes = length; payload = the name */
    MT_DEF_COMM = 301,       /* comm = id, peer = size, bytes = 4*size; payload = int32 world ranks */
    MT_CHUNK = 302           /* MT_RECORD_SIZE - 2 payload bytes after the 2-byte call code */
};

/* Peer values that are not ranks. */
#define MT_PEER_NONE (-1)
#define MT_PEER_PROC_NULL (-2)
#define MT_PEER_ANY (-3)     /* posted with MPI_ANY_SOURCE; the completion says who matched */

/* Completion kinds (aux of an MT_X_COMPLETE record). */
#define MT_KIND_SEND 0
#define MT_KIND_RECV 1

typedef struct {
    uint16_t call;      /* enum mt_call */
    uint16_t nextra;    /* extra/payload records that follow this one */
    uint32_t seq;       /* per-rank event number (extras repeat their event's seq) */
    int64_t t_enter;    /* ns, CLOCK_MONOTONIC of this rank (uncorrected) */
    int64_t t_exit;
    int64_t bytes;      /* count * type size; matched bytes for receives */
    int32_t peer;       /* world rank, or MT_PEER_* */
    int32_t tag;        /* tag sent, or tag matched */
    int32_t comm;       /* communicator id (0 = MPI_COMM_WORLD, -1 = not tracked) */
    int32_t req;        /* tool request id, -1 if none */
    int32_t aux;        /* root (collectives), string id (regions), kind (completions) */
    int32_t pad;
    int64_t cpu_enter;  /* ns, CPU time of the calling thread at entry (version 2) */
    int64_t cpu_exit;   /* ns, CPU time of the calling thread at exit */
} mt_record;

typedef struct {
    int64_t t_local;    /* ns, this rank's clock at the middle of the best round trip */
    int64_t offset;     /* ns to add to local time to get rank 0's time */
    int64_t rtt;        /* ns, the best round trip (the offset is good to +- rtt/2) */
    int32_t valid;
    int32_t rounds;
} mt_sync;

typedef struct {
    char magic[8];      /* "MPITRACE" */
    uint32_t version;
    uint32_t header_size;
    uint32_t record_size;
    int32_t rank;
    int32_t size;
    uint32_t flags;     /* MT_FLAG_* */
    int32_t clock_id;   /* clockid_t used (1 = CLOCK_MONOTONIC) */
    int32_t thread_level;
    int64_t nrecords;   /* records written; set at Finalize / exit, -1 while running */
    int64_t pid;
    mt_sync sync_init;
    mt_sync sync_final;
    char host[MT_HOST_LEN];
    int32_t cpu_clock_id; /* clockid_t of cpu_enter/cpu_exit (3 = CLOCK_THREAD_CPUTIME_ID) */
    int32_t pad0;
    int64_t cpu_interval; /* ns of wall time between reads of the CPU clock (FORMAT.md) */
    char pad[MT_HEADER_SIZE - 8 - 4 * 8 - 8 * 2 - 2 * 32 - MT_HOST_LEN - 16];
} mt_header;

#define MT_FLAG_FINALIZED 1u  /* MPI_Finalize ran and the file is complete */
#define MT_FLAG_ATEXIT 2u     /* the process exited without MPI_Finalize; atexit flushed */

_Static_assert(sizeof(mt_record) == MT_RECORD_SIZE, "record size");
_Static_assert(sizeof(mt_header) == MT_HEADER_SIZE, "header size");

#endif
