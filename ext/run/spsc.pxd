# The feeder's single-producer / single-consumer shared-memory ring (ext/run/spsc.h: layout, memory
# ordering, frame kinds). cimported by ext/run/feeder.pyx (Ring, Dispatcher); nothing else of the
# feeder lives here.
from libc.stdint cimport int64_t, uint32_t, uint64_t, uint8_t

cdef extern from "spsc.h" nogil:
    ctypedef struct spsc_ctl:
        uint64_t capacity
        uint32_t magic
    ctypedef struct spsc_frame:
        uint64_t size
        uint32_t kind
        uint32_t trace
        uint64_t nmsgs
        uint64_t data_len
        int64_t tick_ns
    enum:
        SPSC_MAGIC
        SPSC_HDR
        SPSC_FRAME_TICK
        SPSC_FRAME_PAD
        SPSC_FRAME_END
        SPSC_FRAME_PKTS
    uint64_t spsc_align8(uint64_t n)
    spsc_ctl *spsc_init(void *region, uint64_t region_bytes)
    uint8_t *spsc_data(spsc_ctl *c)
    uint64_t spsc_max_frame(const spsc_ctl *c)
    spsc_frame *spsc_reserve(spsc_ctl *c, uint64_t size)
    void spsc_commit(spsc_ctl *c, uint64_t size)
    uint64_t spsc_used(spsc_ctl *c)
    spsc_frame *spsc_peek(spsc_ctl *c)
    void spsc_release(spsc_ctl *c, uint64_t size)
    void spsc_progress(spsc_ctl *c, uint64_t msgs)
    uint64_t spsc_frames_done(spsc_ctl *c)
    uint64_t spsc_msgs_done(spsc_ctl *c)
    void spsc_set_done(spsc_ctl *c)
    void spsc_backoff(int *spins)
