/* AF_PACKET TPACKET_V3 receive rings joined to a PACKET_FANOUT group (packet(7)).
 *
 * One socket per consumer, each with its own memory-mapped ring of blocks; the kernel writes
 * packets into the blocks and hands a block to user space (TP_STATUS_USER) when it is full or
 * `retire_ms` after its first packet. The consumer reads the packets where they lie (no copy)
 * and gives the block back (TP_STATUS_KERNEL). Which socket of the group gets a packet is
 * decided by the kernel: a flow hash (PACKET_FANOUT_HASH) or a classic-BPF program whose return
 * value modulo the group size is the socket (PACKET_FANOUT_CBPF), here the paper's Eq. 3.
 *
 * Every function returns >= 0 on success, -errno on failure. No Python here: the Cython side
 * (ext/read/afpacket.pyx) calls them with the GIL released.
 */
#ifndef WEBTAP_AFPACKET_H
#define WEBTAP_AFPACKET_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>

typedef struct {
    int fd;
    uint8_t *ring;            /* block_nr * block_size bytes, mapped */
    size_t ring_len;
    unsigned block_size, block_nr;
    unsigned cur;             /* the next block to look at */
    int held;                 /* 1: block `cur` is handed to the caller, not yet released */
    uint64_t packets;         /* packets handed to the caller so far */
    uint64_t blocks;          /* blocks handed to the caller so far */
    uint64_t kernel_packets;  /* PACKET_STATISTICS, summed over reads (reading resets them) */
    uint64_t kernel_drops;
    uint64_t freeze_q;
} wt_ring;

/* A filter that accepts nothing: sockets carry it until the whole group has joined, so that no
 * packet reaches a socket outside the group (it would then be seen twice). */
static inline int wt_ring_set_filter(wt_ring *r, const struct sock_filter *insns, unsigned n) {
    struct sock_fprog fp;
    fp.len = (unsigned short)n;
    fp.filter = (struct sock_filter *)insns;
    if (setsockopt(r->fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof fp) < 0) return -errno;
    return 0;
}

static inline int wt_ring_drop_all(wt_ring *r) {
    struct sock_filter none = BPF_STMT(BPF_RET | BPF_K, 0);
    return wt_ring_set_filter(r, &none, 1);
}

static inline int wt_ring_accept_all(wt_ring *r) {
    struct sock_filter all = BPF_STMT(BPF_RET | BPF_K, 0x40000);
    return wt_ring_set_filter(r, &all, 1);
}

static inline void wt_ring_close(wt_ring *r) {
    if (r->ring && r->ring != MAP_FAILED) munmap(r->ring, r->ring_len);
    r->ring = NULL;
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
}

/* Socket, TPACKET_V3 ring, mmap, a drop-all filter, bind to the interface (all protocols). */
static inline int wt_ring_open(wt_ring *r, int ifindex, unsigned block_size, unsigned block_nr,
                               unsigned frame_size, unsigned retire_ms) {
    int v = TPACKET_V3, err;
    struct tpacket_req3 req;
    struct sockaddr_ll sll;
    memset(r, 0, sizeof *r);
    r->fd = socket(AF_PACKET, SOCK_RAW, 0);           /* protocol 0: nothing until bind */
    if (r->fd < 0) return -errno;
    if (setsockopt(r->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) < 0) goto fail;
    memset(&req, 0, sizeof req);
    req.tp_block_size = block_size;
    req.tp_block_nr = block_nr;
    req.tp_frame_size = frame_size;
    req.tp_frame_nr = (unsigned)(((uint64_t)block_size * block_nr) / frame_size);
    req.tp_retire_blk_tov = retire_ms;
    req.tp_feature_req_word = 0;
    if (setsockopt(r->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0) goto fail;
    r->ring_len = (size_t)block_size * block_nr;
    r->ring = mmap(NULL, r->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, r->fd, 0);
    if (r->ring == MAP_FAILED) {
        /* MAP_LOCKED can fail under RLIMIT_MEMLOCK; the ring is kernel memory anyway */
        r->ring = mmap(NULL, r->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
        if (r->ring == MAP_FAILED) { r->ring = NULL; goto fail; }
    }
    r->block_size = block_size;
    r->block_nr = block_nr;
    if ((err = wt_ring_drop_all(r)) < 0) { wt_ring_close(r); return err; }
    memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = ifindex;
    if (bind(r->fd, (struct sockaddr *)&sll, sizeof sll) < 0) goto fail;
    return 0;
fail:
    err = -errno;
    wt_ring_close(r);
    return err;
}

/* Join fanout group `group` (16 bits) in `mode` (PACKET_FANOUT_HASH, PACKET_FANOUT_CBPF, ...). */
static inline int wt_ring_join(wt_ring *r, unsigned group, unsigned mode) {
    int arg = (int)((group & 0xffff) | (mode << 16));
    if (setsockopt(r->fd, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) < 0) return -errno;
    return 0;
}

/* The group's classic-BPF demux program (set once, through any member). */
static inline int wt_ring_fanout_program(wt_ring *r, const struct sock_filter *insns, unsigned n) {
    struct sock_fprog fp;
    fp.len = (unsigned short)n;
    fp.filter = (struct sock_filter *)insns;
    if (setsockopt(r->fd, SOL_PACKET, PACKET_FANOUT_DATA, &fp, sizeof fp) < 0) return -errno;
    return 0;
}

/* Add the kernel's counters since the last read (reading resets them). */
static inline int wt_ring_stats(wt_ring *r) {
    struct tpacket_stats_v3 st;
    socklen_t len = sizeof st;
    memset(&st, 0, sizeof st);
    if (getsockopt(r->fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) < 0) return -errno;
    r->kernel_packets += st.tp_packets;
    r->kernel_drops += st.tp_drops;
    r->freeze_q += st.tp_freeze_q_cnt;
    return 0;
}

/* Give the held block back to the kernel. */
static inline void wt_ring_release(wt_ring *r) {
    struct tpacket_block_desc *b;
    if (!r->held) return;
    b = (struct tpacket_block_desc *)(r->ring + (size_t)r->cur * r->block_size);
    __atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    r->held = 0;
    r->cur = (r->cur + 1) % r->block_nr;
}

/* The next block, waiting up to timeout_ms for one (0: do not wait): *out is set to it (held
 * until wt_ring_release) and its packet count returned; 0 when no block was ready (*out NULL),
 * -errno on a poll error. */
static inline int64_t wt_ring_next(wt_ring *r, struct tpacket_block_desc **out, int timeout_ms) {
    struct tpacket_block_desc *b;
    uint32_t st;
    struct pollfd pfd;
    *out = NULL;
    if (r->held) wt_ring_release(r);
    b = (struct tpacket_block_desc *)(r->ring + (size_t)r->cur * r->block_size);
    st = __atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE);
    if (!(st & TP_STATUS_USER)) {
        if (timeout_ms == 0) return 0;
        pfd.fd = r->fd;
        pfd.events = POLLIN | POLLERR;
        pfd.revents = 0;
        if (poll(&pfd, 1, timeout_ms) < 0) return errno == EINTR ? 0 : -errno;
        st = __atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE);
        if (!(st & TP_STATUS_USER)) return 0;
    }
    r->blocks += 1;
    r->held = 1;
    *out = b;
    return b->hdr.bh1.num_pkts;
}

static inline struct tpacket3_hdr *wt_block_first(struct tpacket_block_desc *b) {
    return (struct tpacket3_hdr *)((uint8_t *)b + b->hdr.bh1.offset_to_first_pkt);
}

static inline struct tpacket3_hdr *wt_pkt_next(struct tpacket3_hdr *h) {
    return (struct tpacket3_hdr *)((uint8_t *)h + h->tp_next_offset);
}

#endif
