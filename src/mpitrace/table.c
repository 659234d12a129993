/* table.c - the handle hash map declared in table.h. */
#include "table.h"
#include <stdlib.h>

static inline size_t home(const mt_table *t, uint64_t key)
{
    /* Fibonacci hashing: handles are aligned pointers, so mix the bits before masking. */
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - t->bits));
}

int mt_table_init(mt_table *t, int bits)
{
    t->bits = bits;
    t->cap = (size_t)1 << bits;
    t->n = 0;
    t->slots = calloc(t->cap, sizeof(mt_slot));
    return t->slots ? 0 : -1;
}

void mt_table_free(mt_table *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
}

static int grow(mt_table *t)
{
    mt_table bigger;
    if (mt_table_init(&bigger, t->bits + 1) != 0)
        return -1;
    /* Walk from an empty slot so every probe chain is visited front to back and entries of
     * one key keep their order. */
    size_t start = 0;
    while (t->slots[start].used)
        start++;
    for (size_t k = 1; k <= t->cap; k++) {
        const mt_slot *s = &t->slots[(start + k) & (t->cap - 1)];
        if (s->used)
            mt_table_add(&bigger, s->key, s->val);
    }
    free(t->slots);
    *t = bigger;
    return 0;
}

int mt_table_put(mt_table *t, uint64_t key, int64_t val)
{
    if (2 * (t->n + 1) > t->cap && grow(t) != 0)
        return -1;
    size_t mask = t->cap - 1;
    for (size_t i = home(t, key);; i = (i + 1) & mask) {
        mt_slot *s = &t->slots[i];
        if (!s->used) {
            s->used = 1;
            s->key = key;
            s->val = val;
            t->n++;
            return 0;
        }
        if (s->key == key) {
            s->val = val;
            return 0;
        }
    }
}

int mt_table_add(mt_table *t, uint64_t key, int64_t val)
{
    if (2 * (t->n + 1) > t->cap && grow(t) != 0)
        return -1;
    size_t mask = t->cap - 1;
    size_t i = home(t, key);
    while (t->slots[i].used)
        i = (i + 1) & mask;
    t->slots[i] = (mt_slot){.key = key, .val = val, .used = 1};
    t->n++;
    return 0;
}

int mt_table_get(const mt_table *t, uint64_t key, int64_t *val)
{
    if (!t->slots)
        return 0;
    size_t mask = t->cap - 1;
    for (size_t i = home(t, key);; i = (i + 1) & mask) {
        const mt_slot *s = &t->slots[i];
        if (!s->used)
            return 0;
        if (s->key == key) {
            *val = s->val;
            return 1;
        }
    }
}

int mt_table_take(mt_table *t, uint64_t key, int64_t *val)
{
    if (!t->slots)
        return 0;
    size_t mask = t->cap - 1;
    size_t i = home(t, key);
    for (;; i = (i + 1) & mask) {
        if (!t->slots[i].used)
            return 0;
        if (t->slots[i].key == key)
            break;
    }
    if (val)
        *val = t->slots[i].val;
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; t->slots[j].used; j = (j + 1) & mask) {
        size_t h = home(t, t->slots[j].key);
        /* Move j into the hole unless its home lies cyclically in (hole, j]. */
        int stays = (hole <= j) ? (hole < h && h <= j) : (hole < h || h <= j);
        if (!stays) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    t->slots[hole].used = 0;
    t->n--;
    return 1;
}
