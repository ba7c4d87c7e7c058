/* The physical limit of reading a classic pcap file: map it and step from record header to
 * record header (caplen), touching nothing else. What any reader of the file must at least do;
 * docs/PERFORMANCE.md counts every stage's instructions per packet against it.
 * Prints "<packets> <captured bytes>". */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct stat st;
    const uint8_t *p, *end;
    uint64_t n = 0, bytes = 0;
    uint32_t caplen;
    int fd;
    if (argc != 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
    fd = open(argv[1], O_RDONLY);
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < 24) { perror(argv[1]); return 1; }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    end = p + st.st_size;
    p += 24;                                   /* file header; native byte order assumed */
    while (p + 16 <= end) {
        memcpy(&caplen, p + 8, 4);
        if (p + 16 + caplen > end) break;
        n++;
        bytes += caplen;
        p += 16 + caplen;
    }
    printf("%llu %llu\n", (unsigned long long)n, (unsigned long long)bytes);
    return 0;
}
