/* Read-only windows of a trace file mapped into memory, and what happens when the file shrinks
 * under them (mapguard.c; the Cython side is mapped.pyx).
 *
 * A page of a file mapping that lies past the file's end (the file was truncated after it was
 * mapped) raises SIGBUS when touched. The guard's handler looks the address up among the
 * registered windows: inside one, it maps a page of zeros over the faulting page (the access
 * then completes) and counts the fault in the window's sink, which the reader checks, so the
 * run ends with an error instead of a crash or silent zeros; any other SIGBUS goes on to the
 * handler that was installed before (Python's faulthandler, or the default action). */
#ifndef WT_MAPGUARD_H
#define WT_MAPGUARD_H

#include <stddef.h>

#define WT_MAP_SLOTS 1024        /* windows mapped at once, over every open trace */

/* Installs the SIGBUS handler if it is not the current one (keeps the previous to chain to).
 * Returns 0, or -1 with errno set. Call with the GIL held (once per window is cheap). */
int wt_mapguard_install(void);

/* Registers [addr, addr + len) whose faults past the file's end are counted in *sink. Returns
 * the slot (>= 0), or -1 when every slot is taken. */
int wt_mapguard_register(const void *addr, size_t len, long *sink);

/* Forgets a slot (before the window is unmapped). */
void wt_mapguard_unregister(int slot);

#endif
