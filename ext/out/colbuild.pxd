# Declarations of ext/out/colbuild.h (Arrow-layout column builders, code in colbuild.c, compiled
# once into the static library `wtc`): declarations only.
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t

cdef extern from "colbuild.h" nogil:
    ctypedef struct wt_strcol:
        uint8_t *data
        size_t len
        size_t cap
        int32_t *offs
        size_t n
        size_t ncap
    ctypedef struct wt_strlist:
        int32_t *loffs
        size_t n
        size_t ncap
        wt_strcol items
    ctypedef struct wt_u16list:
        int32_t *loffs
        size_t n
        size_t ncap
        uint16_t *vals
        size_t nv
        size_t vcap
    int wt_strcol_push(wt_strcol *c, const void *p, size_t n)
    void wt_strcol_clear(wt_strcol *c)
    void wt_strcol_free(wt_strcol *c)
    int wt_strlist_push_split(wt_strlist *c, const char *p, size_t n, char sep)
    void wt_strlist_clear(wt_strlist *c)
    void wt_strlist_free(wt_strlist *c)
    int wt_u16list_push_dec(wt_u16list *c, const char *p, size_t n, char sep)
    void wt_u16list_clear(wt_u16list *c)
    void wt_u16list_free(wt_u16list *c)
    void wt_strcol_keep(wt_strcol *c, const uint32_t *rows, size_t m)
    void wt_strlist_keep(wt_strlist *c, const uint32_t *rows, size_t m)
    void wt_u16list_keep(wt_u16list *c, const uint32_t *rows, size_t m)
