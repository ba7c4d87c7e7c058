"""The decrypted truth's plaintext parsing on built records (httpanalyzer/tls_truth.py), the
shapes a live capture shows only by chance."""
from __future__ import annotations

from httpanalyzer.tls_truth import _HRR_RANDOM, server_hellos
from tests.tls.hellobuild import ext, server_hello, u16


def _sh(random: bytes, version=0x0303, exts=()):
    body = bytearray(server_hello(version=0x0303, cipher=0xC02B if version == 0x0303 else 0x1301,
                                  exts=exts))
    body[6:38] = random          # type (1) + length (3) + legacy version (2), then the random
    return bytes(body)


def test_encrypted_finished_starting_with_2_is_no_server_hello():
    """TLS 1.2: after the server's ChangeCipherSpec its encrypted Finished is a type-22 record
    whose first byte (the explicit nonce's) is 2 one time in 256; seen live (h1_resume), it was
    read as a second ServerHello and the connection lost its truth."""
    sh = _sh(b"\x11" * 32)
    recs = [(0, 22, b"\x03\x03", sh), (100, 22, b"\x03\x03", b"\x0b" + b"\x00" * 50),
            (160, 20, b"\x03\x03", b"\x01"), (166, 22, b"\x03\x03", b"\x02" + b"\xee" * 39)]
    got = server_hellos(recs)
    assert [(h[0], h[1], h[3]) for h in got] == [(2, b"\x11" * 32, 0xC02B)]


def test_hello_retry_request_is_left_out():
    """TLS 1.3: a HelloRetryRequest (RFC 8446 4.1.3: a ServerHello whose random is the fixed
    SHA-256 of "HelloRetryRequest"), then the real ServerHello after the client's second hello."""
    hrr = _sh(_HRR_RANDOM, 0x0304, (ext(43, u16(0x0304)),))
    real = _sh(b"\x22" * 32, 0x0304, (ext(43, u16(0x0304)),))
    recs = [(0, 22, b"\x03\x03", hrr), (90, 20, b"\x03\x03", b"\x01")]
    assert server_hellos(recs) == []
    recs = [(0, 22, b"\x03\x03", hrr), (90, 22, b"\x03\x03", real), (190, 23, b"\x03\x03", b"\x00" * 40)]
    assert [(h[1], h[2], h[3]) for h in server_hellos(recs)] == [(b"\x22" * 32, 0x0304, 0x1301)]


def test_stream_holds_the_bytes_up_to_the_first_hole_only():
    """A direction's bytes from the SYN to the first hole: a segment from before the SYN is cut
    to its part after it, a far jump (a sequence number 1.5 GB ahead; 4 GB arrays were asked for on real captures)
    allocates nothing, and a retransmission keeps each byte's first packet."""
    from httpanalyzer.tls_truth import _Stream

    st = _Stream()
    st.isn = 1000
    st.add(990, b"0123456789abcdef", 1, 10)      # 10 bytes before the first: 6 kept
    st.add(1006, b"ghij", 2, 20)
    st.add(1002, b"cdefghij", 3, 30)              # a retransmission of bytes of frames 1, 2
    st.add(1000 + 1_500_000_000, b"far", 4, 40)   # beyond a hole, 1.5 GB ahead
    st.build()
    assert bytes(st.data) == b"abcdefghij" and st.complete == 10 and st.holes
    assert list(st.frame_of) == [1] * 6 + [2] * 4
    assert st.first_packet(7) == (2, 20) and st.completing_frame(0, 10) == 2


def test_tcp_fast_open_data_on_the_syn_starts_the_stream(tmp_path):
    """TCP Fast Open: the SYN carries data, which starts one past the SYN's sequence number
    (RFC 7413); it was placed at offset 2**32 - 1 (a 4 GB array: MemoryError on suricata-verify's
    tcp-fastopen captures). Built capture: the ClientHello on the SYN and the ServerHello are
    read (so the connection gets as far as its keys, which the empty key log does not hold)."""
    from httpanalyzer.tls_truth import truth
    from tests.pcapbuild import pcap
    from tests.tls.hellobuild import client_hello, record, server_hello, tcp_packet

    ch = record(22, client_hello(version=0x0303, ciphers=(0xC02B,), exts=()), 0x0301)
    sh = record(22, server_hello(version=0x0303, cipher=0xC02B, exts=()))
    c, s = "10.0.0.1", "10.0.0.2"
    pkts = [tcp_packet(c, s, 40000, 443, 100, 0, ch, flags=0x02),
            tcp_packet(s, c, 443, 40000, 900, 101 + len(ch), b"", flags=0x12),
            tcp_packet(c, s, 40000, 443, 101 + len(ch), 901, b"", flags=0x10),
            tcp_packet(s, c, 443, 40000, 901, 101 + len(ch), sh, flags=0x18)]
    path = tmp_path / "tfo.pcap"
    path.write_bytes(pcap([(1_700_000_000_000_000_000 + k * 1000, p) for k, p in enumerate(pkts)]))
    keys = tmp_path / "k"
    keys.write_text("")
    t = truth(path, keys)
    assert [(x.client, x.version, x.cipher, x.skipped) for x in t.connections] == [
        ((c, 40000), 0x0303, 0xC02B, "no_keys_in_log")]


def test_a_message_cut_at_the_end_keeps_the_ones_before():
    """A capture (or a connection) that ends inside a header block: the complete messages before
    it are the truth, the cut one is not a message (it raised before, and the whole
    connection's truth was lost)."""
    from httpanalyzer.tls_truth import _h1_messages

    pt = (b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
          b"POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz"
          b"GET /c HTTP/1.1\r\nHo")
    got = _h1_messages(pt, True)
    assert [(o, e, t) for o, e, t in got] == [(0, 28, "GET /a HTTP/1.1"),
                                              (28, 28 + 42, "POST /b HTTP/1.1")]
    assert got[-1][1] < len(pt)                   # the caller sees the cut tail


def test_flow_without_its_syn_is_counted(tmp_path):
    """A connection already open when the capture began (no SYN): its bytes cannot be placed,
    so the truth leaves it out and says how many such flows there were."""
    from httpanalyzer.tls_truth import truth
    from tests.pcapbuild import pcap
    from tests.tls.hellobuild import tcp_packet

    c, s_ = "10.0.0.1", "10.0.0.2"
    pkts = [tcp_packet(c, s_, 40001, 443, 5000, 9000, b"\x17\x03\x03\x00\x05hello"),
            tcp_packet(s_, c, 443, 40001, 9000, 5010, b"\x17\x03\x03\x00\x02ok"),
            tcp_packet(c, s_, 40002, 443, 7000, 8000, b"\x17\x03\x03\x00\x01z")]
    path = tmp_path / "nosyn.pcap"
    path.write_bytes(pcap([(1_700_000_000_000_000_000 + k * 1000, p) for k, p in enumerate(pkts)]))
    keys = tmp_path / "k"
    keys.write_text("")
    t = truth(path, keys)
    assert t.connections == [] and t.skipped == {"no_syn_in_capture": 2}


def test_body_lengths_are_read_as_rfc_9112_writes_them():
    """Content-Length is 1*DIGIT and a chunk size 1*HEXDIG (with optional extensions): a sign,
    spaces or underscores, which Python's int() takes, are refused (ValueError: the connection
    is left out as not_decrypted). A negative chunk size walked the data backwards without end
    (found by the fuzz target `truth`)."""
    import pytest

    from httpanalyzer.tls_truth import _h1_messages

    ok = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"1a;name=v\r\n" + b"x" * 26 + b"\r\n0\r\n\r\n"
          b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
    msgs = _h1_messages(ok, False)
    assert [(o, t) for o, _, t in msgs] == [(0, "HTTP/1.1 200 OK"), (ok.index(b"HTTP/1.1 204"), "HTTP/1.1 204 No Content")]
    assert msgs[-1][1] == len(ok)
    for bad in (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n-E\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nabcde",
                b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nabcde",
                b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\nabcdefghij"):
        with pytest.raises(ValueError):
            _h1_messages(bad, False)
