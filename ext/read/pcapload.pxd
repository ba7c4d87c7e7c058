# Declarations of pcapload.h: libpcap's entry points, filled by dlopen() on first use (the
# reason is in the header). The types and constants stay libpcap.pxd's.
from libpcap cimport pcap_t, pcap_pkthdr, bpf_program, bpf_u_int32, pcap_stat

cdef extern from "pcapload.h" nogil:
    ctypedef struct wt_pcap_api:
        pcap_t *(*pcap_open_dead)(int linktype, int snaplen) noexcept nogil
        pcap_t *(*pcap_open_offline_with_tstamp_precision)(const char *fname, unsigned int precision, char *errbuf) noexcept nogil
        pcap_t *(*pcap_create)(const char *source, char *errbuf) noexcept nogil
        int (*pcap_set_snaplen)(pcap_t *p, int snaplen) noexcept nogil
        int (*pcap_set_promisc)(pcap_t *p, int promisc) noexcept nogil
        int (*pcap_set_timeout)(pcap_t *p, int to_ms) noexcept nogil
        int (*pcap_set_buffer_size)(pcap_t *p, int buffer_size) noexcept nogil
        int (*pcap_set_immediate_mode)(pcap_t *p, int immediate) noexcept nogil
        int (*pcap_set_tstamp_precision)(pcap_t *p, int precision) noexcept nogil
        int (*pcap_get_tstamp_precision)(pcap_t *p) noexcept nogil
        int (*pcap_activate)(pcap_t *p) noexcept nogil
        void (*pcap_close)(pcap_t *p) noexcept nogil
        int (*pcap_datalink)(pcap_t *p) noexcept nogil
        int (*pcap_snapshot)(pcap_t *p) noexcept nogil
        int (*pcap_next_ex)(pcap_t *p, pcap_pkthdr **pkt_header, const unsigned char **pkt_data) noexcept nogil
        void (*pcap_breakloop)(pcap_t *p) noexcept nogil
        int (*pcap_compile)(pcap_t *p, bpf_program *fp, const char *str, int optimize, bpf_u_int32 netmask) noexcept nogil
        int (*pcap_setfilter)(pcap_t *p, bpf_program *fp) noexcept nogil
        void (*pcap_freecode)(bpf_program *fp) noexcept nogil
        int (*pcap_offline_filter)(const bpf_program *fp, const pcap_pkthdr *h, const unsigned char *pkt) noexcept nogil
        int (*pcap_stats)(pcap_t *p, pcap_stat *ps) noexcept nogil
        int (*pcap_inject)(pcap_t *p, const void *buf, size_t size) noexcept nogil
        int (*pcap_setnonblock)(pcap_t *p, int nonblock, char *errbuf) noexcept nogil
        int (*pcap_get_selectable_fd)(pcap_t *p) noexcept nogil
        char *(*pcap_geterr)(pcap_t *p) noexcept nogil
        const char *(*pcap_statustostr)(int error) noexcept nogil
        const char *(*pcap_lib_version)() noexcept nogil
        const char *(*pcap_datalink_val_to_name)(int dlt) noexcept nogil
        const char *(*pcap_datalink_val_to_description)(int dlt) noexcept nogil

    wt_pcap_api wt_pcap
    int wt_pcap_load(char *err, size_t errlen)
