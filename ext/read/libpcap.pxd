# Extern declarations of <pcap/pcap.h> (libpcap >= 1.5), one .pxd per C header.
# Only what webtap uses. Every block is nogil: none of these calls touch Python.
from libc.stdint cimport uint8_t, uint32_t
from libc.stdio cimport FILE

cdef extern from "<sys/time.h>" nogil:
    cdef struct timeval:
        long tv_sec
        long tv_usec

cdef extern from "<pcap/pcap.h>" nogil:
    ctypedef struct pcap_t:
        pass
    ctypedef unsigned int bpf_u_int32

    cdef struct bpf_insn:
        pass
    cdef struct bpf_program:
        unsigned int bf_len
        bpf_insn *bf_insns

    cdef struct pcap_pkthdr:
        timeval ts           # seconds and micro- or nanoseconds (see the handle's precision)
        bpf_u_int32 caplen   # bytes present in this capture
        bpf_u_int32 len      # bytes on the wire

    cdef struct pcap_stat:
        unsigned int ps_recv    # packets received
        unsigned int ps_drop    # dropped by the kernel (buffer full)
        unsigned int ps_ifdrop  # dropped by the interface

    ctypedef void (*pcap_handler)(unsigned char *user, const pcap_pkthdr *h, const unsigned char *bytes)

    enum: PCAP_ERRBUF_SIZE
    enum: PCAP_NETMASK_UNKNOWN
    enum: PCAP_TSTAMP_PRECISION_MICRO
    enum: PCAP_TSTAMP_PRECISION_NANO
    enum: PCAP_ERROR
    enum: PCAP_ERROR_BREAK
    enum: PCAP_WARNING

    pcap_t *pcap_open_dead(int linktype, int snaplen)
    pcap_t *pcap_open_offline_with_tstamp_precision(const char *fname, unsigned int precision, char *errbuf)
    pcap_t *pcap_create(const char *source, char *errbuf)
    int pcap_set_snaplen(pcap_t *p, int snaplen)
    int pcap_set_promisc(pcap_t *p, int promisc)
    int pcap_set_timeout(pcap_t *p, int to_ms)
    int pcap_set_buffer_size(pcap_t *p, int buffer_size)
    int pcap_set_immediate_mode(pcap_t *p, int immediate)
    int pcap_set_tstamp_precision(pcap_t *p, int precision)
    int pcap_get_tstamp_precision(pcap_t *p)
    int pcap_activate(pcap_t *p)
    void pcap_close(pcap_t *p)
    int pcap_datalink(pcap_t *p)
    int pcap_snapshot(pcap_t *p)
    int pcap_next_ex(pcap_t *p, pcap_pkthdr **pkt_header, const unsigned char **pkt_data)
    int pcap_dispatch(pcap_t *p, int cnt, pcap_handler callback, unsigned char *user)
    void pcap_breakloop(pcap_t *p)
    int pcap_compile(pcap_t *p, bpf_program *fp, const char *str, int optimize, bpf_u_int32 netmask)
    int pcap_setfilter(pcap_t *p, bpf_program *fp)
    void pcap_freecode(bpf_program *fp)
    int pcap_offline_filter(const bpf_program *fp, const pcap_pkthdr *h, const unsigned char *pkt)
    int pcap_stats(pcap_t *p, pcap_stat *ps)
    int pcap_inject(pcap_t *p, const void *buf, size_t size)
    int pcap_setnonblock(pcap_t *p, int nonblock, char *errbuf)
    int pcap_get_selectable_fd(pcap_t *p)
    char *pcap_geterr(pcap_t *p)
    const char *pcap_statustostr(int error)
    const char *pcap_lib_version()
    const char *pcap_datalink_val_to_name(int dlt)
    const char *pcap_datalink_val_to_description(int dlt)
