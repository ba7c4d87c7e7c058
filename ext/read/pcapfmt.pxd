# The capture formats' constants, one home for the reader (ext/read/source.pyx) and the range
# survey of the parallel plan (ext/read/rangescan.pyx): the largest records either accepts as
# regular, and the pcapng block types (draft-ietf-opsawg-pcapng, section 11.1) and byte-order magic.
cdef enum:
    MAX_CAPLEN = 262144          # libpcap's and Wireshark's largest standard packet (256 KiB)
    MAX_BLOCK = 16777216         # pcapng blocks larger than 16 MiB are treated as corrupt
    BT_SHB = 0x0A0D0D0A          # Section Header Block
    BT_IDB = 1                   # Interface Description Block
    BT_OPB = 2                   # obsolete Packet Block
    BT_SPB = 3                   # Simple Packet Block
    BT_NRB = 4                   # Name Resolution Block
    BT_ISB = 5                   # Interface Statistics Block
    BT_EPB = 6                   # Enhanced Packet Block
    BT_DSB = 10                  # Decryption Secrets Block
    BYTE_ORDER_MAGIC = 0x1A2B3C4D
