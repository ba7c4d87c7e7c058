# The compressed AVL URL tree's arrays (ext/url/avl.pyx; design in its module docstring). The snapshot
# file is SnapshotHeader, then TreeNode[n_slots], then uint32 DataPtr[n_slots], then the
# CompressedURL bytes (record format 2, magic WTAVL004); urlfilter.tree mirrors these layouts as
# NumPy dtypes and a test checks the sizes agree.
from libc.stdint cimport uint32_t, uint64_t

ctypedef struct TreeNode:
    uint32_t left    # bits 0-27: id of the left child (0 = none); bits 28-31: height & 0xF
    uint32_t right   # bits 0-27: id of the right child (0 = none); bits 28-29: height >> 4 (heights
                     # are < 64); bit 30: 0; bit 31: no-prefix flag (no entry is a proper prefix
                     # of this node's key; ext/url/avl.pyx, "Prefix match")

ctypedef struct SnapshotHeader:
    char magic[8]          # b"WTAVL004"
    uint64_t n_slots       # entries in TreeNode and DataPtr (ids 1..n_slots-1; id 0 is "none")
    uint64_t count         # live URLs
    uint64_t blob_used     # bytes of CompressedURL in the file
    uint64_t dead_bytes    # bytes of CompressedURL that no live record uses (0 after compaction)
    uint32_t root          # id of the root node, 0 when the tree is empty
    uint32_t free_head     # first free id, the free list is chained through TreeNode.left; 0 = none
    uint64_t tag           # the caller's number (urlfilter: the store's replayed change sequence)
    uint32_t crc32         # CRC-32 of this header (with crc32 = 0) and the three arrays after it
    uint32_t pad           # zero
