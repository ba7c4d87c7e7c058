/* The TLS stage's watch list shared by the walk and the stage (what it is, and who writes what:
 * tlswatch.h). */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "tlswatch.h"

int tls_watch_init(TlsWatch *w, uint32_t min_cap) {
    memset(w, 0, sizeof(*w));
    w->cap = 4096;
    while (w->cap < min_cap && w->cap < (1u << 26))
        w->cap *= 2;
    /* the checked allocator (ext/common/alloc.h): MemoryError set on failure */
    w->keys = wt_zalloc(w->cap, sizeof(uint64_t));
    w->gens = w->keys ? wt_zalloc(w->cap, sizeof(uint64_t)) : NULL;
    w->spare = w->gens ? wt_alloc(w->cap * sizeof(uint64_t)) : NULL;
    w->pub = w->spare ? wt_alloc((w->cap / 2) * sizeof(uint64_t)) : NULL;
    if (w->keys == NULL || w->gens == NULL || w->spare == NULL || w->pub == NULL
            || pthread_mutex_init(&w->lock, NULL) != 0) {
        free(w->keys);
        free(w->gens);
        free(w->spare);
        free(w->pub);
        memset(w, 0, sizeof(*w));
        return -1;
    }
    return 0;
}

void tls_watch_free(TlsWatch *w) {
    if (w->keys == NULL)
        return;
    pthread_mutex_destroy(&w->lock);
    free(w->keys);
    free(w->gens);
    free(w->spare);
    free(w->pub);
    memset(w, 0, sizeof(*w));
}

TlsWatch *tls_watch_new(uint32_t min_cap) {
    TlsWatch *w = wt_alloc(sizeof(TlsWatch));
    if (w != NULL && tls_watch_init(w, min_cap) != 0) {
        free(w);
        return NULL;
    }
    return w;
}

static void watch_capsule_free(PyObject *cap) {
    TlsWatch *w = PyCapsule_GetPointer(cap, "webtap.TlsWatch");
    if (w == NULL) {
        PyErr_Clear();
        return;
    }
    tls_watch_free(w);
    free(w);
}

PyObject *tls_watch_capsule(TlsWatch *w) {
    PyObject *cap = PyCapsule_New(w, "webtap.TlsWatch", watch_capsule_free);
    if (cap == NULL) {
        tls_watch_free(w);
        free(w);
    }
    return cap;
}

/* The set after the stage's publication: the flows added in batches after g (the last batch
 * the stage has seen), then the stage's own, tagged g. */
static void take_publication(TlsWatch *w, uint64_t g) {
    uint32_t i, ns = 0, half = w->cap / 2;
    int keep_overflow = w->overflow && w->overflow_gen > g;
    if (w->n == 0 && w->pub_n == 0 && !w->overflow && !w->pub_full)
        return;
    /* survivors: key and generation side by side in spare (at most cap / 2 pairs) */
    for (i = 0; i < w->cap && ns < half; i++)
        if (w->keys[i] != 0 && w->gens[i] > g) {
            w->spare[2 * ns] = w->keys[i];
            w->spare[2 * ns + 1] = w->gens[i];
            ns++;
        }
    memset(w->keys, 0, w->cap * sizeof(uint64_t));
    w->n = 0;
    w->overflow = 0;
    for (i = 0; i < ns; i++)
        if (tls_watch_put(w, w->spare[2 * i], w->spare[2 * i + 1]) != 0)
            keep_overflow = 1;
    for (i = 0; i < w->pub_n; i++)
        if (tls_watch_put(w, w->pub[i], g) != 0)
            keep_overflow = 1;
    if (w->pub_full)
        keep_overflow = 1;
    if (keep_overflow) {
        w->overflow = 1;
        if (w->overflow_gen < w->walked)
            w->overflow_gen = w->walked;
    }
}

void tls_watch_begin(TlsWatch *w) {
    uint64_t g;
    w->walked += 1;
    pthread_mutex_lock(&w->lock);
    if (w->pub_new) {
        /* the stage cannot have seen this batch; a stage fed more batches than were walked
         * with this set (its own walks) has seen every batch walked */
        g = w->pub_gen < w->walked - 1 ? w->pub_gen : w->walked - 1;
        take_publication(w, g);
        w->pub_new = 0;
    }
    pthread_mutex_unlock(&w->lock);
    if (w->overflow)
        w->overflow_gen = w->walked;   /* this batch's hello starts are not added */
}

void tls_watch_publish_begin(TlsWatch *w) {
    pthread_mutex_lock(&w->lock);
    w->fed += 1;
    w->pub_gen = w->fed;
    w->pub_n = 0;
    w->pub_full = 0;
}

void tls_watch_publish_add(TlsWatch *w, uint64_t k) {
    if (w->pub_n < w->cap / 2)
        w->pub[w->pub_n++] = k;
    else
        w->pub_full = 1;
}

void tls_watch_publish_end(TlsWatch *w) {
    w->pub_new = 1;
    pthread_mutex_unlock(&w->lock);
}
