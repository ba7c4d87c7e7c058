/* The checked allocator (declarations and contract: alloc.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "alloc.h"

static void *no_memory(size_t count, size_t size) {
    PyGILState_STATE g = PyGILState_Ensure();
    if (count == 1)
        PyErr_Format(PyExc_MemoryError, "cannot allocate %zu bytes", size);
    else
        PyErr_Format(PyExc_MemoryError, "cannot allocate %zu x %zu bytes", count, size);
    PyGILState_Release(g);
    return NULL;
}

void *wt_realloc(void *p, size_t nbytes) {
    void *q = realloc(p, nbytes ? nbytes : 1);
    return q ? q : no_memory(1, nbytes);
}

void *wt_alloc(size_t nbytes) {
    return wt_realloc(NULL, nbytes);
}

void *wt_zalloc(size_t count, size_t size) {
    void *q = calloc(count ? count : 1, size ? size : 1);
    return q ? q : no_memory(count, size);
}
