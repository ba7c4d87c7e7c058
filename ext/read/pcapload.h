/* libpcap, loaded when first needed (pcapload.c; the Cython side is source.pyx).
 *
 * The offline reader (source.pyx FileReader) parses pcap and pcapng itself and calls libpcap
 * only to compile and apply a BPF filter; live capture and the reference reader
 * (PcapHandle) call it throughout. Linking the module against libpcap made every run map
 * libpcap and what it links in turn (on Debian: libdbus, libsystemd, libgcrypt, liblz4,
 * liblzma, libzstd, libcap, libgpg-error: nine libraries, ~1.9 M instructions of relocations
 * and their page faults) before the first packet, also a run over a file without a filter
 * that never calls it. So the module holds libpcap's entry points as pointers that
 * wt_pcap_load() fills from dlopen() the first time a filter is compiled, a handle opened or
 * the version asked for; the types and constants still come from <pcap/pcap.h>. */
#ifndef WT_PCAPLOAD_H
#define WT_PCAPLOAD_H

#include <stddef.h>
#include <pcap/pcap.h>

/* every libpcap function the module calls: X(return type, name, (parameter types)) */
#define WT_PCAP_FUNCS(X) \
    X(pcap_t *, pcap_open_dead, (int, int)) \
    X(pcap_t *, pcap_open_offline_with_tstamp_precision, (const char *, unsigned int, char *)) \
    X(pcap_t *, pcap_create, (const char *, char *)) \
    X(int, pcap_set_snaplen, (pcap_t *, int)) \
    X(int, pcap_set_promisc, (pcap_t *, int)) \
    X(int, pcap_set_timeout, (pcap_t *, int)) \
    X(int, pcap_set_buffer_size, (pcap_t *, int)) \
    X(int, pcap_set_immediate_mode, (pcap_t *, int)) \
    X(int, pcap_set_tstamp_precision, (pcap_t *, int)) \
    X(int, pcap_get_tstamp_precision, (pcap_t *)) \
    X(int, pcap_activate, (pcap_t *)) \
    X(void, pcap_close, (pcap_t *)) \
    X(int, pcap_datalink, (pcap_t *)) \
    X(int, pcap_snapshot, (pcap_t *)) \
    X(int, pcap_next_ex, (pcap_t *, struct pcap_pkthdr **, const u_char **)) \
    X(void, pcap_breakloop, (pcap_t *)) \
    X(int, pcap_compile, (pcap_t *, struct bpf_program *, const char *, int, bpf_u_int32)) \
    X(int, pcap_setfilter, (pcap_t *, struct bpf_program *)) \
    X(void, pcap_freecode, (struct bpf_program *)) \
    X(int, pcap_offline_filter, (const struct bpf_program *, const struct pcap_pkthdr *, const u_char *)) \
    X(int, pcap_stats, (pcap_t *, struct pcap_stat *)) \
    X(int, pcap_inject, (pcap_t *, const void *, size_t)) \
    X(int, pcap_setnonblock, (pcap_t *, int, char *)) \
    X(int, pcap_get_selectable_fd, (pcap_t *)) \
    X(char *, pcap_geterr, (pcap_t *)) \
    X(const char *, pcap_statustostr, (int)) \
    X(const char *, pcap_lib_version, (void)) \
    X(const char *, pcap_datalink_val_to_name, (int)) \
    X(const char *, pcap_datalink_val_to_description, (int))

#define WT_PCAP_POINTER(ret, name, params) ret (*name) params;
typedef struct {
    WT_PCAP_FUNCS(WT_PCAP_POINTER)
} wt_pcap_api;
#undef WT_PCAP_POINTER

/* The entry points: valid once wt_pcap_load() returned 0 (in this module: symbols are hidden). */
extern wt_pcap_api wt_pcap;

/* Loads libpcap and fills wt_pcap, once (later calls return at once). Returns 0, or -1 with a
 * one-line reason in err (errlen bytes). Call with the GIL held (it serialises the first call). */
int wt_pcap_load(char *err, size_t errlen);

#endif
