/* The bare libpcap read loop: the floor any analyzer that reads a file with libpcap pays.
 * Usage: pcap_loop FILE   -> prints "packets bytes" (captured bytes). */
#include <pcap/pcap.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	char err[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const unsigned char *d;
	unsigned long long n = 0, bytes = 0;
	unsigned int sum = 0;
	int rc;
	pcap_t *p;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	p = pcap_open_offline(argv[1], err);
	if (!p) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	while ((rc = pcap_next_ex(p, &h, &d)) >= 0) {
		if (rc == 0)
			continue;
		n++;
		bytes += h->caplen;
		sum += d[h->caplen ? h->caplen - 1 : 0]; /* touch the packet like a reader must */
	}
	pcap_close(p);
	printf("%llu %llu %u\n", n, bytes, sum & 1);
	return 0;
}
