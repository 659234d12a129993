/* table.h - a small open-addressing hash map from an MPI handle (as 64 bits) to an int64.
 *
 * The tracer keeps two: MPI_Request -> tool request id (plus kind and communicator), and
 * MPI_Comm -> communicator table index. Linear probing, backward-shift deletion, grows at
 * half load (deletion keeps entries of one key in insertion order), so a lookup is a multiply and one or two probes.
 */
#ifndef MPITRACE_TABLE_H
#define MPITRACE_TABLE_H

#include <stdint.h>
#include <stddef.h>

typedef struct {
    uint64_t key;
    int64_t val;
    int used;
} mt_slot;

typedef struct {
    mt_slot *slots;
    size_t cap;      /* power of two */
    size_t n;
    int bits;
} mt_table;

int mt_table_init(mt_table *t, int bits);
void mt_table_free(mt_table *t);
/* Insert or replace; returns 0, or -1 when out of memory. */
int mt_table_put(mt_table *t, uint64_t key, int64_t val);
/* Insert another entry even if the key is there (a multimap): entries with one key come back
 * from get/take oldest first. Open MPI hands the same MPI_Request to several sends that
 * completed at once, so request handles are not unique. Returns 0, or -1 when out of memory. */
int mt_table_add(mt_table *t, uint64_t key, int64_t val);
/* Returns 1 and sets *val when found (the oldest entry of the key), 0 otherwise. */
int mt_table_get(const mt_table *t, uint64_t key, int64_t *val);
/* Removes the oldest entry of the key; returns 1 and sets *val (if not NULL) when it was there. */
int mt_table_take(mt_table *t, uint64_t key, int64_t *val);

#endif
