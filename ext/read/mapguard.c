/* SIGBUS guard of the mapped trace windows: see mapguard.h. */
#define _GNU_SOURCE
#include "mapguard.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    uintptr_t start;     /* 0: free, 1: being claimed or freed (read and written atomically) */
    uintptr_t end;
    long *sink;
} Slot;

static Slot slots[WT_MAP_SLOTS];
static struct sigaction previous;     /* the handler before ours (chained to) */

static void on_sigbus(int sig, siginfo_t *info, void *uctx)
{
    uintptr_t a = (uintptr_t)info->si_addr;
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < WT_MAP_SLOTS; i++) {
        uintptr_t s = __atomic_load_n(&slots[i].start, __ATOMIC_SEQ_CST);
        if (s <= 1 || a < s || a >= __atomic_load_n(&slots[i].end, __ATOMIC_SEQ_CST))
            continue;
        void *p = (void *)(a & ~(uintptr_t)(page - 1));
        /* a page of zeros over the page past the file's end: the access completes */
        if (mmap(p, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                != MAP_FAILED) {
            long *sink = __atomic_load_n(&slots[i].sink, __ATOMIC_SEQ_CST);
            if (sink)
                __atomic_add_fetch(sink, 1, __ATOMIC_SEQ_CST);
            return;
        }
        break;
    }
    /* not ours (or no page could be mapped): what was there before */
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* the default action: restore it and raise the signal again (a fault sent by kill()
     * would not come back by itself), which ends the process */
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
}

int wt_mapguard_install(void)
{
    struct sigaction cur, sa;
    if (sigaction(SIGBUS, NULL, &cur) != 0)
        return -1;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)
        return 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    previous = cur;
    return sigaction(SIGBUS, &sa, NULL);
}

int wt_mapguard_register(const void *addr, size_t len, long *sink)
{
    for (int i = 0; i < WT_MAP_SLOTS; i++) {
        uintptr_t want = 0;
        /* claim a free slot (marker 1, which the handler skips), fill it, then publish it */
        if (__atomic_compare_exchange_n(&slots[i].start, &want, (uintptr_t)1, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            __atomic_store_n(&slots[i].sink, sink, __ATOMIC_SEQ_CST);
            __atomic_store_n(&slots[i].end, (uintptr_t)addr + len, __ATOMIC_SEQ_CST);
            __atomic_store_n(&slots[i].start, (uintptr_t)addr, __ATOMIC_SEQ_CST);
            return i;
        }
    }
    return -1;
}

void wt_mapguard_unregister(int slot)
{
    if (slot < 0 || slot >= WT_MAP_SLOTS)
        return;
    __atomic_store_n(&slots[slot].start, (uintptr_t)1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slots[slot].end, (uintptr_t)0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slots[slot].sink, (long *)NULL, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slots[slot].start, (uintptr_t)0, __ATOMIC_SEQ_CST);
}
