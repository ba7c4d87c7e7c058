"""Read-only windows of a trace file mapped into memory: webtap.capture's source for a regular,
uncompressed file.

Reading a file through read() copies every byte out of the page cache (on the 16-round HTTP
bench trace the copy was a fifth of the whole run's CPU time, and it ran on the reading thread,
the pipeline's critical path); a window maps the page cache's own pages instead, and the
reader and the walk touch only the bytes they parse. ``MapFile.window`` maps one window with
MAP_POPULATE (its page tables are set up in one call, with the GIL released, instead of one
fault per page); the window is unmapped when the last array over it goes (a batch's ``data``).

A file that shrinks while it is read would end the process with SIGBUS at the first touch of
a page past its new end. The guard (mapguard.c) maps a page of zeros there instead and counts
the fault in the file's ``MapFile``; the reader checks that count and ends the run with an
error (webtap.capture), so neither a crash nor silent zeros come of it.
"""
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_FillInfo
from libc.errno cimport errno, ENOMEM
from libc.stdint cimport int64_t
from posix.unistd cimport close

import os

cdef extern from "<sys/mman.h>" nogil:
    void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void *addr, size_t length)
    void *MAP_FAILED
    enum:
        PROT_READ
        MAP_SHARED
        MAP_POPULATE

cdef extern from "mapguard.h" nogil:
    int wt_mapguard_install()
    int wt_mapguard_register(const void *addr, size_t len, long *sink)
    void wt_mapguard_unregister(int slot)

cdef extern from *:
    """
    static inline long wt_load_long(long *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
    """
    long wt_load_long(long *p) nogil


cdef class MapFile:
    """One trace file read through mapped windows: its descriptor (a duplicate, closed when
    the last window goes), the end of the furthest window mapped, and the count of pages found
    past the file's end (the file shrank while mapped); every window of the file refers to it."""
    cdef long count
    cdef readonly int fd
    cdef readonly int64_t end

    def __cinit__(self, int fd):
        self.count = 0
        self.end = 0
        self.fd = -1
        self.fd = os.dup(fd)

    def __dealloc__(self):
        if self.fd >= 0:
            close(self.fd)

    @property
    def faults(self):
        """Pages of this file's windows that lay past the file's end when touched."""
        return wt_load_long(&self.count)

    def size(self):
        """The file's size now."""
        return os.fstat(self.fd).st_size

    def shrunk(self):
        """None, or in words how the file shrank under its windows (a page past its new end
        was touched, or it is now shorter than what was mapped)."""
        cdef long n = wt_load_long(&self.count)
        size = self.size()
        if n or size < self.end:
            return (f"the file shrank to {size} bytes while it was read (mapped up to byte "
                    f"{self.end}; {n} page(s) touched past its end)")
        return None

    def window(self, int64_t start, size_t length):
        """Bytes [start, start + length) mapped read-only, page tables populated (start: a
        multiple of the page size); OSError when the system refuses (the caller reads the
        file instead)."""
        cdef void *p
        cdef int slot
        cdef int fd = self.fd
        if length == 0:
            raise ValueError("an empty window")
        if wt_mapguard_install() != 0:
            raise OSError(errno, f"SIGBUS guard: {os.strerror(errno)}")
        with nogil:
            p = mmap(NULL, length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, <long>start)
        if p == MAP_FAILED:
            raise OSError(errno, os.strerror(errno))
        slot = wt_mapguard_register(p, length, &self.count)
        if slot < 0:
            munmap(p, length)
            raise OSError(ENOMEM, "too many mapped trace windows at once")
        cdef Window w = Window.__new__(Window)
        w.addr = p
        w.length = length
        w.slot = slot
        w.file = self
        w.start = start
        if start + <int64_t>length > self.end:
            self.end = start + length
        return w


cdef class Window:
    """Bytes [start, start + size) of a file, mapped read-only (buffer protocol, no copy)."""
    cdef void *addr
    cdef size_t length
    cdef int slot
    cdef readonly MapFile file
    cdef readonly int64_t start

    def __cinit__(self):
        self.addr = NULL
        self.length = 0
        self.slot = -1

    def __dealloc__(self):
        if self.slot >= 0:
            wt_mapguard_unregister(self.slot)
        if self.addr != NULL:
            munmap(self.addr, self.length)

    def __getbuffer__(self, Py_buffer *buf, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("a mapped trace window is read-only")
        PyBuffer_FillInfo(buf, self, self.addr, <Py_ssize_t>self.length, 1, flags)

    def __releasebuffer__(self, Py_buffer *buf):
        pass

    def __len__(self):
        return self.length

    @property
    def size(self):
        return self.length

    @property
    def faults(self):
        """The file's count of pages past its end (MapFile.faults)."""
        return self.file.faults
