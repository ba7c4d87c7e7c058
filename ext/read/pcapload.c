/* libpcap, loaded when first needed: see pcapload.h. */
#include "pcapload.h"

#include <dlfcn.h>
#include <stdio.h>

wt_pcap_api wt_pcap;
static int loaded;

/* libpcap's sonames: upstream's (.so.1) and Debian's (.so.0.8, the same ABI), then the
 * development link */
static const char *const SONAMES[] = {"libpcap.so.1", "libpcap.so.0.8", "libpcap.so", NULL};

int wt_pcap_load(char *err, size_t errlen)
{
    void *h = NULL;
    const char *why = "not found";
    if (loaded)
        return 0;
    for (int i = 0; SONAMES[i] != NULL && h == NULL; i++) {
        h = dlopen(SONAMES[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            const char *e = dlerror();
            if (e != NULL)
                why = e;                  /* the last soname's reason */
        }
    }
    if (h == NULL) {
        snprintf(err, errlen, "libpcap could not be loaded (%s)", why);
        return -1;
    }
#define WT_PCAP_SYMBOL(ret, name, params) \
    if ((*(void **)&wt_pcap.name = dlsym(h, #name)) == NULL) { \
        snprintf(err, errlen, "libpcap has no %s (libpcap >= 1.5 is needed)", #name); \
        return -1; \
    }
    WT_PCAP_FUNCS(WT_PCAP_SYMBOL)
#undef WT_PCAP_SYMBOL
    loaded = 1;
    return 0;
}
