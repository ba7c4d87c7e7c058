/* The physical baseline of the capture benchmark: libpcap's own read loop, touching nothing.
 * pcap_next_ex copies every packet's bytes into libpcap's buffer; this loop only counts them.
 * Built and run by benchmarks/bench_capture.py. Prints "<packets> <captured bytes>". */
#include <pcap/pcap.h>
#include <stdio.h>

int main(int argc, char **argv) {
    char err[PCAP_ERRBUF_SIZE];
    struct pcap_pkthdr *h;
    const u_char *d;
    unsigned long long n = 0, bytes = 0;
    int rc;
    if (argc != 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
    pcap_t *p = pcap_open_offline(argv[1], err);
    if (!p) { fprintf(stderr, "%s\n", err); return 1; }
    while ((rc = pcap_next_ex(p, &h, &d)) == 1) { n++; bytes += h->caplen; }
    printf("%llu %llu\n", n, bytes);
    pcap_close(p);
    return rc == -2 ? 0 : 1;
}
