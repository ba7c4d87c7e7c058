"""Dissect stage facade: packet batches in, HTTP message batches out.

    >>> batch = dissect(packets, data)        # packets: PACKET_DTYPE array, data: uint8 buffer
    >>> batch.msgs                            # MESSAGE_DTYPE array, one row per HTTP first packet
    >>> batch.counters["ip_fragment"]         # what was skipped, and why
    >>> batch.column("uri")                   # pyarrow string array, built in C
    >>> batch.to_pandas()

Spans in `msgs` point into `data`; a MessageBatch keeps `data` alive, so its columns can be built
at any time. The work happens in ext/walk/dissect.pyx without the GIL; nothing here loops over
messages in Python.
"""
from __future__ import annotations

import numpy as np

from webtap import records as kinds
from webtap._ext import dissect as _ext
from webtap.bufpool import BufferPool
from webtap.records.message import (
    DISSECT_REASONS,
    ENCAP_NAMES,
    MESSAGE_DTYPE,
    METHOD_NAMES,
    MSG_REQUEST,
    MSG_RESPONSE,
    PACKET_DTYPE,
    SPAN_FIELDS,
    UDP_TUNNEL_KINDS,
)

__all__ = ["MessageBatch", "EventBuffers", "TlsMessageBuffers", "dissect", "parse_http", "TEXT_ERRORS", "encap_text", "set_tunnel_ports"]

#: Ways to turn span bytes into text (see docs/ACCURACY.md, "Text"):
#: "replace" keeps valid UTF-8 and maps each byte outside a valid sequence to U+FFFD;
#: "tshark" mimics tshark 4.0 -T fields (each byte >= 0x80 -> U+FFFD, NUL ends the text).
TEXT_ERRORS = ("replace", "tshark")

_KIND_NAMES = {MSG_REQUEST: "request", MSG_RESPONSE: "response"}


def _counter_dict(counters: np.ndarray) -> dict[str, int]:
    return {name: int(counters[i]) for i, name in enumerate(DISSECT_REASONS)}


class MessageBatch:
    """The HTTP first packets of one packet batch.

    msgs: MESSAGE_DTYPE array (a view of the dissector's output buffer).
    data: the packet batch's byte buffer that the spans in msgs point into.
    counters: DissectReason name -> count for the batch.
    tls: the TLS stage's messages (MSG_TLS / MSG_QUIC, MESSAGE_DTYPE) found by the same walk
    when dissect() was given the stage's watch list; None otherwise.
    tls_watch: that watch list (the capsule), so that a stage can tell its own candidates from
    another stage's.
    tcp_events: with dissect(tcp_events=True), the walk's TCP segments as TcpEvent records
    (ext/walk/message.pxd; a uint8 array), for stages that follow handshakes; None otherwise.
    segment_tap: the stage the walk ran in its own loop over this batch (dissect(segment_tap=
    ...)); None otherwise.

    Read-only once made (setting an attribute raises AttributeError). A plain class, not a
    frozen dataclass: the decorator compiles its generated methods with exec() at import,
    ~0.4 ms of every command's start-up (issue 29).
    """

    __slots__ = ("msgs", "data", "counters", "tls", "tls_watch", "tcp_events", "segment_tap")

    def __init__(self, msgs: np.ndarray, data: np.ndarray, counters: dict[str, int] | None = None,
                 tls: np.ndarray | None = None, tls_watch: object = None,
                 tcp_events: np.ndarray | None = None, segment_tap: object = None) -> None:
        init = object.__setattr__
        init(self, "msgs", msgs)
        init(self, "data", data)
        init(self, "counters", {} if counters is None else counters)
        init(self, "tls", tls)
        init(self, "tls_watch", tls_watch)
        init(self, "tcp_events", tcp_events)
        init(self, "segment_tap", segment_tap)

    def __setattr__(self, name, value):
        raise AttributeError(f"MessageBatch is read-only: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"MessageBatch is read-only: cannot delete {name!r}")

    def __repr__(self) -> str:
        return (f"MessageBatch(msgs={self.msgs!r}, data={self.data!r}, counters={self.counters!r}, "
                f"tls={self.tls!r}, tls_watch={self.tls_watch!r}, tcp_events={self.tcp_events!r}, "
                f"segment_tap={self.segment_tap!r})")

    def __len__(self) -> int:
        return len(self.msgs)

    def column(self, name: str, errors: str = "replace"):
        """One column as a pyarrow array: a Span field (method, uri, version, host, user_agent,
        reason) as strings, src_ip/dst_ip as text, any other field as a numeric array
        (webtap.records.messageview)."""
        return kinds.messageview.column(self, name, errors)

    def to_arrow(self, errors: str = "replace"):
        """A pyarrow RecordBatch with one row per message (webtap.records.messageview)."""
        return kinds.messageview.to_arrow(self, errors)

    def to_pandas(self, errors: str = "replace"):
        """A DataFrame with one row per message (webtap.records.messagepandas)."""
        return kinds.messagepandas.to_pandas(self, errors)


def encap_text(encap: np.ndarray):
    """HttpMsg.encap codes as text (webtap.records.messageview.encap_text: pyarrow)."""
    return kinds.messageview.encap_text(encap)


def set_tunnel_ports(ports: dict[str, list[int]] | None) -> None:
    """Name extra UDP ports for tunnels, process-wide: e.g. {"vxlan": [8472]} (Linux's VXLAN
    default) or {"geneve": [47101]}. Kinds: webtap.records.message.UDP_TUNNEL_KINDS. The IANA ports
    (VXLAN 4789, Geneve 6081, GTP-U 2152, Teredo 3544, AYIYA 5072, GRE-in-UDP 4754) always
    apply; None or {} removes the extra ones. Every walk of link/IP/TCP (the dissector, the
    feeder's reader, the pass-by filter's handshake table, the TLS/QUIC record stage) reads the
    same setting; worker
    processes started afterwards by fork inherit it, spawned ones must call this themselves."""
    pairs = []
    for kind, plist in (ports or {}).items():
        if kind not in UDP_TUNNEL_KINDS:
            raise ValueError(f"unknown tunnel kind {kind!r}; one of {', '.join(UDP_TUNNEL_KINDS)}")
        for port in plist:
            if not 0 < int(port) < 65536:
                raise ValueError(f"bad UDP port {port!r}")
            pairs.append((int(port), ENCAP_NAMES.index(kind)))
    _ext.set_tunnel_ports(pairs)     # the one setting every walk reads (ext/walk/l34.c l34_shared_cfg)


_TCP_EVENT_SIZE = _ext.tcp_event_size()


class EventBuffers(BufferPool):
    """The TCP events' buffers of one walk (dissect(events=...)), reused (webtap.bufpool): a
    buffer no batch's events refer to any more (its stages are done with them) is written
    again, else a new one is made (a power of two of bytes); at most `keep` are held. A new
    buffer's pages are faulted in by the kernel as the walk first writes them (96 bytes per
    segment: 32 MB over the TLS bench trace, ~8,000 page faults of a 0.35 s run); a reused
    one's are mapped and warm."""

    def __init__(self, keep: int = 8):
        super().__init__(keep)

    def make(self, size: int) -> np.ndarray:
        return np.empty(1 << max(16, (size - 1).bit_length()), np.uint8)


_MESSAGE_SIZE = MESSAGE_DTYPE.itemsize


class TlsMessageBuffers(EventBuffers):
    """The TLS stage's message buffers of one walk (dissect(tls_msgs=...)), reused as the TCP
    events' are (EventBuffers, webtap.bufpool): the walk writes one HttpMsg per TLS/QUIC message
    into room for one per packet (200 bytes each), and a new array per batch had its written
    pages faulted in afresh (TLS bench trace: ~1,400 of the ~9,400 page faults --tls-out adds)."""


def dissect(packets: np.ndarray, data: np.ndarray, reasons: np.ndarray | None = None,
            tls_watch=None, tcp_events: bool = False,
            events: EventBuffers | None = None,
            tls_msgs: TlsMessageBuffers | None = None, segment_tap=None) -> MessageBatch:
    """Find the HTTP first packets of a packet batch.

    packets: PACKET_DTYPE array (e.g. a capture batch's `.packets`); data: its uint8 buffer.
    reasons: optional uint8 array, one per packet, filled with each packet's DissectReason index
    (see webtap.records.message.DISSECT_REASONS): which rule decided its fate.
    tls_watch: a TLS stage's watch list (its `watch` capsule): the same walk also finds that
    stage's messages (MessageBatch.tls).
    tcp_events: the same walk also reports every TCP segment (MessageBatch.tcp_events).
    events: where the TCP events are written (a pipeline's walk keeps one EventBuffers); None,
    a new array per call.
    tls_msgs: where the TLS stage's messages are written (a pipeline's walk with a watch list
    keeps one TlsMessageBuffers); None, a new array per call.
    segment_tap: a stage the walk runs in its own loop, segment by segment (the TLS exchange
    stage, httpanalyzer.tls.ExchangeRun): an object with `tap` (the capsule of its C tap,
    ext/walk/message.pxd SegmentTap) and `lock`, held here while the walk runs it: its owner
    takes its records from another thread (MessageBatch.segment_tap says it ran).
    """
    packets = np.asarray(packets)
    if packets.dtype != PACKET_DTYPE:
        raise TypeError(f"packets must have dtype webtap.records.message.PACKET_DTYPE, not {packets.dtype}")
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 1:
        data = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    tout = (tls_msgs.get(len(packets) * _MESSAGE_SIZE)
            if tls_msgs is not None and tls_watch is not None else None)
    if segment_tap is not None:
        with segment_tap.lock:
            res = _ext.dissect_batch(packets, data, reasons, tls_watch, int(tcp_events),
                                     events.get(len(packets) * _TCP_EVENT_SIZE)
                                     if tcp_events and events is not None else None,
                                     tout, segment_tap.tap)
        return MessageBatch(msgs=res[0], data=data, counters=_counter_dict(res[1]),
                            tls=res[2] if len(res) > 2 else None, tls_watch=tls_watch,
                            tcp_events=res[3] if len(res) > 3 else None, segment_tap=segment_tap)
    if tcp_events:
        out = events.get(len(packets) * _TCP_EVENT_SIZE) if events is not None else None
        msgs, counters, tls, ev = _ext.dissect_batch(packets, data, reasons, tls_watch,
                                                     int(tcp_events), out, tout)
        return MessageBatch(msgs=msgs, data=data, counters=_counter_dict(counters), tls=tls,
                            tls_watch=tls_watch, tcp_events=ev)
    if tls_watch is not None:
        msgs, counters, tls = _ext.dissect_batch(packets, data, reasons, tls_watch, 0, None, tout)
        return MessageBatch(msgs=msgs, data=data, counters=_counter_dict(counters), tls=tls,
                            tls_watch=tls_watch)
    msgs, counters = _ext.dissect_batch(packets, data, reasons)
    return MessageBatch(msgs=msgs, data=data, counters=_counter_dict(counters))


def parse_http(payload: bytes, wire_len: int | None = None) -> dict | None:
    """Parse one TCP payload as the dissector would (a convenience for tests and notebooks).

    Returns None when the payload does not start an HTTP request or response, else a dict of the
    message's fields with spans decoded (errors="replace") and `flags` as an int.
    """
    reason, rec = _ext.parse_http_payload(payload, wire_len)
    if DISSECT_REASONS[reason] not in ("http_request", "http_response"):
        return None
    out: dict[str, object] = {
        "kind": _KIND_NAMES[int(rec["kind"])],
        "method_id": int(rec["method_id"]),
        "status": int(rec["status"]),
        "flags": int(rec["flags"]),
    }
    for name in SPAN_FIELDS:
        off, ln = int(rec[name]["off"]), int(rec[name]["len"])
        out[name] = payload[off : off + ln].decode("utf-8", "replace") if ln else None
        out[name + "_span"] = (off, ln)
    return out
