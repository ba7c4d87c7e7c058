from webtap._ext import dissect as ext
from webtap.records.message import DISSECT_REASONS, MESSAGE_DTYPE, METHOD_NAMES, PACKET_DTYPE


def test_message_dtype_matches_struct():
    assert MESSAGE_DTYPE.itemsize == ext.sizeof_http_msg()


def test_packet_dtype_matches_struct():
    assert PACKET_DTYPE.itemsize == ext.sizeof_packet_ref()


def test_method_table_matches_schema():
    assert ext.method_names() == METHOD_NAMES
    assert METHOD_NAMES[1:10] == ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")


def test_counters_have_one_slot_per_reason():
    import numpy as np

    msgs, counters = ext.dissect_batch(np.zeros(0, PACKET_DTYPE), np.zeros(0, np.uint8))
    assert len(msgs) == 0 and len(counters) == len(DISSECT_REASONS)


def test_encapsulation_fields_are_appended():
    """Issue 23 appended its fields after `_reserved`: every earlier field keeps its offset."""
    names = MESSAGE_DTYPE.names
    tail = ("encap", "outer_src", "outer_dst", "tunnel_id", "outer_ip_version", "encap_depth", "seg_off")
    assert names[-len(tail):] == tail
    assert MESSAGE_DTYPE.fields["encap"][1] >= MESSAGE_DTYPE.fields["_reserved"][1] + 1
    assert MESSAGE_DTYPE.fields["_reserved"][1] == 147 and MESSAGE_DTYPE.itemsize == 200   # was 152 bytes
