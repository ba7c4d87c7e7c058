/* Single-producer / single-consumer byte ring in shared memory (the packet feeder's rings).
 *
 * Layout of one ring region (the producer and the consumer each map it; nothing else is shared):
 *   [0, 64)     producer line: head (bytes ever committed)
 *   [64, 128)   consumer line: tail (bytes ever released), progress counters written by the consumer
 *   [128, 192)  capacity, magic, producer_done flag
 *   [192, ...)  data area of `capacity` bytes (a multiple of 8)
 * head and tail only grow; head - tail bytes are in use. The producer publishes a frame with a
 * release store of head after writing it; the consumer reads head with an acquire load, so it sees
 * the frame's bytes, and gives the space back with a release store of tail (the producer's acquire
 * load of tail then knows the consumer is done reading it). No locks, no syscalls.
 *
 * Frames are 8-byte aligned and never wrap: a frame that does not fit before the end of the data
 * area is preceded by a PAD frame covering the rest of it.
 */
#ifndef WEBTAP_SPSC_H
#define WEBTAP_SPSC_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define SPSC_MAGIC 0x77747370u /* "wtsp" */
#define SPSC_HDR 192u

typedef struct {
    _Atomic uint64_t head;        /* producer-owned */
    uint8_t _pad0[56];
    _Atomic uint64_t tail;        /* consumer-owned */
    _Atomic uint64_t frames_done; /* frames the consumer has finished (progress for fault reports) */
    _Atomic uint64_t msgs_done;   /* HTTP messages the consumer has fed to its pairing table */
    uint8_t _pad1[40];
    uint64_t capacity;            /* data area bytes */
    uint32_t magic;
    _Atomic uint32_t producer_done; /* 1: no frame will follow the last one */
    uint8_t _pad2[48];
} spsc_ctl;

/* One frame: this header, then its body. size covers header + body, a multiple of 8. */
typedef struct {
    uint64_t size;
    uint32_t kind;      /* SPSC_FRAME_* */
    uint32_t trace;     /* position of the messages' trace among the inputs */
    uint64_t nmsgs;     /* PacketRef records (PKTS) in the body */
    uint64_t data_len;  /* packet bytes in the body (after the records and their clocks) */
    int64_t tick_ns;    /* TICK: the capture clock to advance to */
    uint64_t _reserved;
} spsc_frame;

/* PKTS: PacketRef records of HTTP first packets, one clock each, the packets' captured bytes
   (the consumer dissects). TICK: the capture clock moves. END: no more input. (Kind 1 was a
   frame of dissected messages; the feeder sends packets only.) */
enum { SPSC_FRAME_TICK = 2, SPSC_FRAME_PAD = 3, SPSC_FRAME_END = 4, SPSC_FRAME_PKTS = 5 };

static inline uint64_t spsc_align8(uint64_t n) { return (n + 7u) & ~(uint64_t)7u; }

static inline spsc_ctl *spsc_init(void *region, uint64_t region_bytes) {
    spsc_ctl *c = (spsc_ctl *)region;
    memset(c, 0, SPSC_HDR);
    c->capacity = (region_bytes - SPSC_HDR) & ~(uint64_t)7u;
    c->magic = SPSC_MAGIC;
    atomic_store_explicit(&c->head, 0, memory_order_release);
    atomic_store_explicit(&c->tail, 0, memory_order_release);
    return c;
}

static inline uint8_t *spsc_data(spsc_ctl *c) { return (uint8_t *)c + SPSC_HDR; }

/* Largest frame the ring accepts: a quarter of it, so a PAD never blocks a frame forever. */
static inline uint64_t spsc_max_frame(const spsc_ctl *c) { return (c->capacity / 4) & ~(uint64_t)7u; }

/* Producer: room for a frame of `size` bytes (aligned) at the write position, writing a PAD over
 * the end of the data area first when needed. Returns the frame pointer, or NULL when the
 * consumer has not yet released enough space (the caller waits and retries). */
static inline spsc_frame *spsc_reserve(spsc_ctl *c, uint64_t size) {
    uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    uint64_t cap = c->capacity;
    uint64_t pos = head % cap;
    uint64_t room_to_end = cap - pos;
    if (room_to_end < size) {
        /* need the rest of the area (PAD) plus size from the start */
        if (cap - (head - tail) < room_to_end + size)
            return NULL;
        spsc_frame *pad = (spsc_frame *)(spsc_data(c) + pos);
        pad->size = room_to_end;
        pad->kind = SPSC_FRAME_PAD;
        atomic_store_explicit(&c->head, head + room_to_end, memory_order_release);
        head += room_to_end;
        pos = 0;
    } else if (cap - (head - tail) < size) {
        return NULL;
    }
    return (spsc_frame *)(spsc_data(c) + pos);
}

/* Producer: publish the frame written at the reserved position. */
static inline void spsc_commit(spsc_ctl *c, uint64_t size) {
    uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
    atomic_store_explicit(&c->head, head + size, memory_order_release);
}

/* Producer: bytes in use (for tests and back-pressure statistics). */
static inline uint64_t spsc_used(spsc_ctl *c) {
    return atomic_load_explicit(&c->head, memory_order_relaxed)
           - atomic_load_explicit(&c->tail, memory_order_acquire);
}

/* Consumer: the next frame (PAD frames are released and skipped), or NULL when the ring is empty. */
static inline spsc_frame *spsc_peek(spsc_ctl *c) {
    for (;;) {
        uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
        uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
        if (head == tail)
            return NULL;
        spsc_frame *f = (spsc_frame *)(spsc_data(c) + tail % c->capacity);
        if (f->kind != SPSC_FRAME_PAD)
            return f;
        atomic_store_explicit(&c->tail, tail + f->size, memory_order_release);
    }
}

/* Consumer: give back the frame returned by spsc_peek. */
static inline void spsc_release(spsc_ctl *c, uint64_t size) {
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
    atomic_store_explicit(&c->tail, tail + size, memory_order_release);
}

/* Consumer: progress counters (read by the feeder to report a consumer that failed). */
static inline void spsc_progress(spsc_ctl *c, uint64_t msgs) {
    atomic_fetch_add_explicit(&c->frames_done, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->msgs_done, msgs, memory_order_relaxed);
}
static inline uint64_t spsc_frames_done(spsc_ctl *c) {
    return atomic_load_explicit(&c->frames_done, memory_order_relaxed); }
static inline uint64_t spsc_msgs_done(spsc_ctl *c) {
    return atomic_load_explicit(&c->msgs_done, memory_order_relaxed); }

/* Producer: no frame will follow the last one. */
static inline void spsc_set_done(spsc_ctl *c) {
    atomic_store_explicit(&c->producer_done, 1, memory_order_release); }

/* Either side, waiting for the other: spin first (it is usually about to move), then sleep up
 * to 200 us, so an idle ring costs no CPU and a busy one no syscalls. *spins counts the calls
 * of one wait (start it at 0). */
static inline void spsc_backoff(int *spins) {
    if (*spins < 200) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        struct timespec t = {0, *spins < 260 ? 5000 : 200000};
        nanosleep(&t, NULL);
    }
    (*spins)++;
}

#endif
