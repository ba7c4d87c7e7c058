/* The Eq. 2 pending table's index (what it is and its rules: pendtable.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "alloc.h"
#include "pendtable.h"

uint32_t pt_cells_for(int64_t max_pending, uint32_t initial_cells) {
    uint32_t c = (uint32_t)1 << 30;
    while (c > 16 && (uint64_t)(c / 2) >= (uint64_t)max_pending)
        c /= 2;
    return c > initial_cells ? c : initial_cells;
}

int pt_init(PendIndex *t, size_t stride, int32_t first_cap, int32_t limit, uint32_t ncells,
            uint32_t max_cells) {
    uint32_t i;
    t->pool = NULL;
    t->stride = stride;
    t->pool_cap = 0;
    t->first_cap = first_cap;
    t->limit = limit;
    t->free_head = -1;
    t->n = 0;
    t->age_head = -1;
    t->age_tail = -1;
    t->ncells = ncells;
    t->max_cells = max_cells > ncells ? max_cells : ncells;
    t->cell_head = NULL;
    t->cell_tail = NULL;
    t->cell_head = (int32_t *)wt_alloc(ncells * sizeof(int32_t));
    if (t->cell_head == NULL)
        return -1;
    t->cell_tail = (int32_t *)wt_alloc(ncells * sizeof(int32_t));
    if (t->cell_tail == NULL)
        return -1;
    for (i = 0; i < ncells; i++) {
        t->cell_head[i] = -1;
        t->cell_tail[i] = -1;
    }
    return 0;
}

void pt_release_all(PendIndex *t) {
    free(t->pool);
    free(t->cell_head);
    free(t->cell_tail);
    t->pool = NULL;
    t->cell_head = NULL;
    t->cell_tail = NULL;
    t->pool_cap = 0;
    t->free_head = -1;
}

int32_t pt_alloc(PendIndex *t) {
    int32_t i, nc;
    if (t->free_head == -1) {
        uint8_t *pool;
        nc = t->pool_cap ? t->pool_cap * 2 : t->first_cap;
        if (nc > t->limit)
            nc = t->limit;
        if (nc <= t->pool_cap) {
            PyGILState_STATE g = PyGILState_Ensure();
            PyErr_SetString(PyExc_RuntimeError,
                            "pending table: entry pool exhausted (bug: cap not enforced)");
            PyGILState_Release(g);
            return -2;
        }
        pool = (uint8_t *)wt_realloc(t->pool, (size_t)nc * t->stride);
        if (pool == NULL)
            return -2;
        t->pool = pool;
        for (i = t->pool_cap; i < nc; i++)
            pt_at(t, i)->next = i + 1 < nc ? i + 1 : -1;
        t->free_head = t->pool_cap;
        t->pool_cap = nc;
    }
    i = t->free_head;
    t->free_head = pt_at(t, i)->next;
    return i;
}

void pt_free(PendIndex *t, int32_t i) {
    pt_at(t, i)->next = t->free_head;
    t->free_head = i;
}

/* Append entry i at the tail of cell's chain (the chains' arrival order: pt_link, pt_grow). */
static void chain_append(PendIndex *t, int32_t i, uint32_t cell) {
    pt_at(t, i)->next = -1;
    if (t->cell_tail[cell] == -1)
        t->cell_head[cell] = i;
    else
        pt_at(t, t->cell_tail[cell])->next = i;
    t->cell_tail[cell] = i;
}

void pt_link(PendIndex *t, int32_t i, uint32_t hash, int64_t stamp) {
    PendLinks *e = pt_at(t, i);
    e->stamp = stamp;
    e->hash = hash;
    chain_append(t, i, hash & (t->ncells - 1));
    e->age_next = -1;
    e->age_prev = t->age_tail;
    if (t->age_tail == -1)
        t->age_head = i;
    else
        pt_at(t, t->age_tail)->age_next = i;
    t->age_tail = i;
    t->n += 1;
}

void pt_unlink(PendIndex *t, int32_t i) {
    PendLinks *e = pt_at(t, i);
    uint32_t cell = e->hash & (t->ncells - 1);
    int32_t prev = -1;
    int32_t j = t->cell_head[cell];
    while (j != i && j != -1) {
        prev = j;
        j = pt_at(t, j)->next;
    }
    if (j == i) {
        if (prev == -1)
            t->cell_head[cell] = e->next;
        else
            pt_at(t, prev)->next = e->next;
        if (t->cell_tail[cell] == i)
            t->cell_tail[cell] = prev;
    }
    if (e->age_prev == -1)
        t->age_head = e->age_next;
    else
        pt_at(t, e->age_prev)->age_next = e->age_next;
    if (e->age_next == -1)
        t->age_tail = e->age_prev;
    else
        pt_at(t, e->age_next)->age_prev = e->age_prev;
    e->next = -1;
    e->age_prev = -1;
    e->age_next = -1;
    t->n -= 1;
}

int pt_grow(PendIndex *t) {
    uint32_t n, k;
    int32_t j;
    int grown = 0;
    while (pt_full(t)) {
        int32_t *head, *tail;
        n = t->ncells * 2;
        head = (int32_t *)wt_realloc(t->cell_head, n * sizeof(int32_t));
        if (head == NULL)
            return -1;
        t->cell_head = head;
        tail = (int32_t *)wt_realloc(t->cell_tail, n * sizeof(int32_t));
        if (tail == NULL)
            return -1;
        t->cell_tail = tail;
        t->ncells = n;
        grown += 1;
        for (k = 0; k < n; k++) {
            t->cell_head[k] = -1;
            t->cell_tail[k] = -1;
        }
        j = t->age_head;
        while (j != -1) {
            PendLinks *e = pt_at(t, j);
            chain_append(t, j, e->hash & (n - 1));
            j = e->age_next;
        }
    }
    return grown;
}
