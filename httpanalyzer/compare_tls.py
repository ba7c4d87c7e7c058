"""`httpanalyzer compare --tls TRACE...`: webtap's TLS handshakes against tshark's (issue 17).

Both sides are reduced to hellos keyed by the frame number of the hello's first packet (webtap's
request_frame / response_frame; tshark's lowest frame among the TCP segments and handshake
fragments it reassembled). For every ClientHello SNI, ALPN, offered versions and JA3 are compared,
for every ServerHello the selected version, cipher and JA3S; webtap's pairs are checked against
tshark's TCP stream numbers. tshark runs through httpanalyzer.tshark (the one runner, which checks
its exit status). Every difference gets a category; a category is an explanation only
when it was verified on the trace (e.g. re-running tshark with the port decoded as TLS), else it
is `unexplained`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

import pandas as pd

from httpanalyzer.compare_exchanges import compare_exchanges, summary_lines
from httpanalyzer.errors import TruthError
from httpanalyzer import tls as tls_stage
from httpanalyzer.tshark import AGG as _AGG, SEP as _SEP, TsharkError, run_fields
from webtap import clikit
from webtap.capture import open_trace

#: Why a hello differs; keys are the JSON's names.
CATEGORIES = {
    "match": "same hello on both sides, all compared fields equal",
    "tshark_port_not_tls": "webtap found a hello on a port tshark does not dissect as TLS; "
                           "verified: tshark finds the same hello with the port decoded as TLS",
    "tshark_retransmission": "tshark shows a retransmitted copy of a hello (tcp.analysis."
                             "retransmission); webtap keeps the first copy and counts the repeat",
    "tunnel_not_decapsulated": "tshark found the hello inside an encapsulation webtap's dissector "
                               "does not open (frame.protocols names it: CAPWAP, L2TP, Cisco "
                               "SGT; the tunnels of docs/ACCURACY.md 'Encapsulations' are opened "
                               "and not in this category)",
    "tshark_out_of_order": "webtap found a hello in a segment tshark flags as out of order "
                           "(tcp.analysis.out_of_order) and does not dissect, its reassembly "
                           "of the stream having given up",
    "tshark_retransmission_not_dissected": "webtap found a hello in a segment tshark flags as a "
                                           "retransmission (spurious, after port reuse, TFO "
                                           "resend) and does not dissect",
    "tshark_record_never_reassembled": "the hello starts a TLS record that continues past its "
                                       "segment and a later segment of the record is missing "
                                       "from the capture: tshark never completes the record, "
                                       "webtap reads the whole hello from the first segment",
    "broken_hello": "webtap's record says the hello is incomplete, too long or malformed "
                    "(unmatched_reason), and tshark decodes no hello there either",
    "tshark_stopped_at_damage": "the trace has a corrupt record header (webtap warned and "
                                "resynchronised); tshark stops reading there (verified: the "
                                "hello lies after the last frame tshark reads) and never sees "
                                "the hello",
    "sslv2_client_hello": "an SSLv2-format ClientHello (2-byte record header with the top bit "
                          "set): outside SSL 3.0 .. TLS 1.3, webtap does not parse it",
    "quic_version_without_keys": "a QUIC Initial of a version (drafts other than 29, gQUIC T051, "
                                 "mvfst) whose Initial salt webtap's QUIC crypto does not hold; "
                                 "tshark decrypts it",
    "link_type_not_dissected": "the capture's link type (e.g. PPP) is one webtap's dissector "
                               "does not read (frame.protocols names it)",
    "quic_first_frame_differs": "the same QUIC hello on both sides (same connection, all compared "
                                "fields equal) whose first frame differs: webtap names the first "
                                "Initial with CRYPTO bytes of the hello, tshark the frames its "
                                "CRYPTO reassembly used",
    "tshark_quic_hello_resent": "a QUIC client sent its ClientHello again after a Retry or Version "
                                "Negotiation (CRYPTO offset 0 under new keys); tshark shows the "
                                "first copy only (an earlier ClientHello of the same connection "
                                "and SNI/ALPN is on its side), webtap both",
    "tshark_quic_reused_crypto_offset": "a QUIC client Initial whose CRYPTO offsets tshark has "
                                        "seen on the same connection ID (its expert info: "
                                        "'reused stream offset'; the same Initial from another "
                                        "address, or resent after Version Negotiation): tshark "
                                        "treats it as a retransmission, webtap keys QUIC "
                                        "connections by addresses and ports",
    "tshark_quic_decryption_failed": "tshark could not open the QUIC Initial (its expert info: "
                                     "'Decryption failed', e.g. keys of the connection before a "
                                     "Version Negotiation); webtap opened it with keys from the "
                                     "packet's own DCID, the AEAD tag checked",
    "tshark_empty_supported_versions": "a ServerHello whose supported_versions extension has "
                                       "length 0: tshark reads the next extension's type as the "
                                       "version, webtap keeps the legacy version (checked on "
                                       "tshark's extension lengths)",
    "quic_fixed_bit_greased": "the hello's QUIC packet clears the fixed bit (RFC 9287, grease "
                              "the QUIC bit); webtap's long-header parser (ext/tls/quic_crypto.h) "
                              "refuses such packets, tshark reads them",
    "tshark_other_protocol": "tshark dissects the frame as a protocol carrying TLS inside its "
                             "own framing (e.g. OpenVPN, PROXY); webtap sees no TLS record start",
    "tshark_quic_copy_after_nat": "the same QUIC ClientHello captured twice, before and after a "
                                  "NAT (same Destination Connection ID and ports, another client "
                                  "address): tshark ties QUIC connections by connection ID and "
                                  "takes the second copy for a retransmission, webtap keys them "
                                  "by address and port and records both; verified from quic.dcid",
    "unexplained": "a difference no verified category explains",
}

FIELDS = ["frame.number", "frame.protocols", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
          "tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport", "tcp.stream", "tls.handshake.type",
          "tls.handshake.extensions_server_name", "tls.handshake.extensions_alpn_str",
          "tls.handshake.version", "tls.handshake.extensions.supported_version",
          "tls.handshake.ciphersuite", "tls.handshake.ja3", "tls.handshake.ja3s", "tcp.segment",
          "tls.handshake.fragment", "tcp.analysis.retransmission", "tls.record.content_type",
          "quic.crypto.fragment", "quic.version"]
_FILTER = "(tls.handshake.type == 1 or tls.handshake.type == 2) and (tcp or quic)"


def _vals(s: str) -> list[str]:
    return [v for v in s.split(_AGG)] if s else []


def _last(s: str) -> str:
    v = _vals(s)
    return v[-1] if v else ""


def tshark_hellos(path: str, tshark: str = "tshark", decode_as: list[str] | None = None) -> pd.DataFrame:
    """One row per ClientHello / ServerHello tshark decodes over TCP (desegmentation on)."""
    cmd = [tshark, "-n", "-r", path, "-o", "tcp.desegment_tcp_streams:TRUE"]
    for d in decode_as or []:
        cmd += ["-d", d]
    cmd += ["-Y", _FILTER, "-T", "fields", "-E", f"separator={_SEP}", "-E", "occurrence=a",
            "-E", f"aggregator={_AGG}"]
    for f in FIELDS:
        cmd += ["-e", f]
    rows = []
    for r in run_fields(cmd, FIELDS, path):
        types = _vals(r["tls.handshake.type"])
        frames = [int(r["frame.number"])]
        for k in ("tcp.segment", "tls.handshake.fragment", "quic.crypto.fragment"):
            frames += [int(x) for x in _vals(r[k]) if x.isdigit()]
        first = min(frames)
        src = _last(r["ipv6.src"]) or _last(r["ip.src"])
        dst = _last(r["ipv6.dst"]) or _last(r["ip.dst"])
        sv = _vals(r["tls.handshake.extensions.supported_version"])
        ver = _vals(r["tls.handshake.version"])
        ciph = _vals(r["tls.handshake.ciphersuite"])
        base = dict(frame=first, tshark_frame=int(r["frame.number"]), protocols=r["frame.protocols"],
                    src=src, dst=dst, sport=_last(r["tcp.srcport"]) or _last(r["udp.srcport"]),
                    dport=_last(r["tcp.dstport"]) or _last(r["udp.dstport"]),
                    transport="quic" if "quic" in r["frame.protocols"].split(":") else "tcp",
                    quic_version=_last(r["quic.version"]),
                    stream=_last(r["tcp.stream"]),
                    retrans=bool(r["tcp.analysis.retransmission"]))
        if "1" in types:
            rows.append(dict(base, side="ch",
                             sni=(_vals(r["tls.handshake.extensions_server_name"]) or [None])[0],
                             alpn=",".join(_vals(r["tls.handshake.extensions_alpn_str"])),
                             versions=",".join(sv) if sv else (ver[0] if ver else ""),
                             ja3=(_vals(r["tls.handshake.ja3"]) or [None])[0]))
        if "2" in types:
            # in a frame holding a ClientHello too (rare), the ServerHello's values come last
            rows.append(dict(base, side="sh",
                             server_version=(sv[-1] if sv else (ver[-1] if ver else None)),
                             cipher=(ciph[-1] if ciph else None),
                             ja3s=(_vals(r["tls.handshake.ja3s"]) or [None])[0]))
    return pd.DataFrame(rows)


def webtap_hellos(df: pd.DataFrame) -> pd.DataFrame:
    """The same reduction of webtap's records (httpanalyzer.analyze_tls)."""
    rows = []
    for r in df.itertuples(index=False):
        if pd.notna(r.request_frame):
            rows.append(dict(side="ch", frame=int(r.request_frame), src=r.client_ip, dst=r.server_ip,
                             transport=r.transport,
                             sport=str(r.client_port), dport=str(r.server_port),
                             sni=r.sni if isinstance(r.sni, str) else None,
                             alpn=",".join(r.alpn) if r.alpn is not None else "",
                             versions=",".join(r.client_versions) if r.client_versions is not None else "",
                             ja3=r.ja3 if isinstance(r.ja3, str) else None,
                             reason=r.unmatched_reason, paired=bool(r.matched),
                             other=int(r.response_frame) if pd.notna(r.response_frame) else None))
        if pd.notna(r.response_frame):
            rows.append(dict(side="sh", frame=int(r.response_frame), src=r.server_ip, dst=r.client_ip,
                             transport=r.transport,
                             sport=str(r.server_port), dport=str(r.client_port),
                             server_version=r.server_version, cipher=r.cipher,
                             ja3s=r.ja3s if isinstance(r.ja3s, str) else None,
                             reason=r.unmatched_reason, paired=bool(r.matched),
                             other=int(r.request_frame) if pd.notna(r.request_frame) else None))
    return pd.DataFrame(rows)


_CMP = {"ch": ("sni", "alpn", "versions", "ja3"), "sh": ("server_version", "cipher", "ja3s")}
#: encapsulations webtap's walk (ext/walk/l34.pxd) does not open; the ones it opens (GRE, ERSPAN,
#: VXLAN, Geneve, GTP-U, Teredo, AYIYA, IP-in-IP, PPPoE, MPLS, LLC/SNAP) explain nothing
_ENCAPS = ("capwap.data", "l2tp", "cmd")
_LINKS_NOT_DISSECTED = ("ppp", "wlan", "radiotap", "chdlc", "ppi")
_OTHER = ("openvpn", "proxy", "socks")


@dataclass
class TlsComparison:
    rows: pd.DataFrame                         # one row per hello (either side), with category
    files: list = field(default_factory=list)

    def summary(self) -> dict:
        c = self.rows["category"].value_counts().to_dict() if len(self.rows) else {}
        return {"files": len(self.files), "hellos": int(len(self.rows)),
                "categories": {k: int(v) for k, v in c.items()},
                "unexplained": int(c.get("unexplained", 0))}


#: the columns of webtap_hellos and tshark_hellos rows (either side): a frame without rows, or
#: with one side only, still has them all, so the join always suffixes the shared ones
_W_COLS = ["side", "frame", "src", "dst", "transport", "sport", "dport", "sni", "alpn", "versions",
           "ja3", "reason", "paired", "other", "server_version", "cipher", "ja3s"]
_T_COLS = ["side", "frame", "tshark_frame", "protocols", "src", "dst", "sport", "dport",
           "transport", "quic_version", "stream", "retrans", "sni", "alpn", "versions", "ja3",
           "server_version", "cipher", "ja3s"]


def _with_columns(df: pd.DataFrame, cols) -> pd.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    return df.reindex(columns=list(df.columns) + missing) if missing else df


def compare_tls_trace(path: str, tshark: str = "tshark", gc_timeout: float = 60.0,
                      warnings: list | None = None) -> pd.DataFrame:
    damage: list = []
    w = _with_columns(webtap_hellos(tls_stage.analyze_tls(path, gc_timeout=gc_timeout, warnings=damage)),
                      _W_COLS)
    if warnings is not None:
        warnings.extend(damage)
    t = _with_columns(tshark_hellos(path, tshark=tshark), _T_COLS)
    cols = ["side", "frame"]
    m = w.merge(t, on=cols, how="outer", suffixes=("_w", "_t"), indicator="how")
    m["file"] = path
    cats, diffs = [], []
    redo = []
    for i, r in enumerate(m.itertuples(index=False)):
        rd = r._asdict()
        if rd["how"] == "both":
            bad = [f for f in _CMP[rd["side"]] if not _same(f, rd.get(f + "_w"), rd.get(f + "_t"))]
            diffs.append(",".join(bad))
            cats.append("match" if not bad else "unexplained")
        elif rd["how"] == "right_only":
            diffs.append("missing_in_webtap")
            protos = str(rd.get("protocols") or "")
            if rd.get("retrans"):
                cats.append("tshark_retransmission")
            elif (rd.get("transport_t", rd.get("transport")) == "quic"
                  and not _quic_keys_known(rd.get("quic_version"))):
                cats.append("quic_version_without_keys")
            elif protos.split(":")[0] in _LINKS_NOT_DISSECTED:
                cats.append("link_type_not_dissected")
            elif _encapsulated(protos):
                cats.append("tunnel_not_decapsulated")
            elif any(e in protos for e in _OTHER):
                cats.append("tshark_other_protocol")
            else:
                cats.append("unexplained")
        else:
            diffs.append("missing_in_tshark")
            cats.append("unexplained")
            redo.append(i)
    m["differs"] = diffs
    m["category"] = cats
    if redo:
        # verify: tshark with the webtap hellos' ports decoded as TLS
        ports = sorted({int(m.at[i, "dport_w"]) for i in redo if m.at[i, "side"] == "ch"}
                       | {int(m.at[i, "sport_w"]) for i in redo if m.at[i, "side"] == "sh"})
        quic = any(m.at[i, "transport_w"] == "quic" for i in redo)
        t2 = tshark_hellos(path, tshark=tshark, decode_as=[f"tcp.port=={p},tls" for p in ports]
                           + ([f"udp.port=={p},quic" for p in ports] if quic else []))
        if len(t2):
            found = set(zip(t2["side"], t2["frame"]))
            for i in redo:
                if (m.at[i, "side"], m.at[i, "frame"]) in found:
                    m.at[i, "category"] = "tshark_port_not_tls"
        for i in redo:
            if m.at[i, "category"] == "unexplained" and m.at[i, "reason"] in _BROKEN:
                m.at[i, "category"] = "broken_hello"
        left = [i for i in redo if m.at[i, "category"] == "unexplained"]
        if left:
            flags = tshark_frame_flags(path, sorted({int(m.at[i, "frame"]) for i in left}), tshark)
            for i in left:
                f = flags.get(int(m.at[i, "frame"]), {})
                if f.get("out_of_order"):
                    m.at[i, "category"] = "tshark_out_of_order"
                elif f.get("retransmission"):
                    m.at[i, "category"] = "tshark_retransmission_not_dissected"
                elif _record_continues(f):
                    m.at[i, "category"] = "tshark_record_never_reassembled"
                elif "Decryption failed" in f.get("expert", "") and m.at[i, "transport_w"] == "quic":
                    m.at[i, "category"] = "tshark_quic_decryption_failed"
                elif "reused stream offset" in f.get("expert", ""):
                    m.at[i, "category"] = "tshark_quic_reused_crypto_offset"
    # tshark hellos webtap lacks: SSLv2-format ClientHellos (out of scope: SSL 3.0 .. TLS 1.3)
    miss = [i for i in range(len(m)) if m.at[i, "category"] == "unexplained"
            and m.at[i, "differs"] == "missing_in_webtap"]
    if miss:
        flags = tshark_frame_flags(path, sorted({int(m.at[i, "tshark_frame"]) for i in miss}), tshark)
        for i in miss:
            f = flags.get(int(m.at[i, "tshark_frame"]), {})
            pl = f.get("payload", "")
            if len(pl) >= 6 and int(pl[:2], 16) & 0x80 and pl[4:6] == "01":
                m.at[i, "category"] = "sslv2_client_hello"
            elif f.get("quic_bits") and any((int(b, 16) & 0xC0) == 0x80 for b in f["quic_bits"]):
                m.at[i, "category"] = "quic_fixed_bit_greased"
    if damage and redo:
        # a damaged trace: tshark stops at the first corrupt record header, webtap goes on
        left = [i for i in redo if m.at[i, "category"] == "unexplained"]
        if left:
            frames = run_fields([tshark, "-n", "-r", path, "-T", "fields", "-e", "frame.number"],
                                ["frame.number"], path)
            last = max((int(r["frame.number"]) for r in frames if r["frame.number"].isdigit()),
                       default=0)
            for i in left:
                if int(m.at[i, "frame"]) > last:
                    m.at[i, "category"] = "tshark_stopped_at_damage"
    _rejoin_quic(m)
    # a ServerHello whose supported_versions extension is empty: tshark 4.0 reads the next two
    # bytes (the following extension's type) as the version; webtap keeps the legacy version
    odd = [i for i in range(len(m)) if m.at[i, "category"] == "unexplained"
           and m.at[i, "side"] == "sh" and m.at[i, "differs"] == "server_version"]
    if odd:
        fields = ["frame.number", "tls.handshake.extension.type", "tls.handshake.extension.len"]
        cmd = [tshark, "-n", "-r", path, "-Y", " or ".join(f"frame.number == {int(m.at[i, 'tshark_frame'])}"
                                                              for i in odd),
               "-T", "fields", "-E", f"separator={_SEP}", "-E", "occurrence=a", "-E", "aggregator=,"]
        for f in fields:
            cmd += ["-e", f]
        lens = {}
        for r in run_fields(cmd, fields, path):
            types, ls = r[fields[1]].split(","), r[fields[2]].split(",")
            lens[int(r["frame.number"])] = dict(zip(types, ls))
        for i in odd:
            if lens.get(int(m.at[i, "tshark_frame"]), {}).get("43") == "0":
                m.at[i, "category"] = "tshark_empty_supported_versions"
    _quic_nat_copies(m, path, tshark)
    return m


def _quic_nat_copies(m: pd.DataFrame, path: str, tshark: str) -> None:
    """webtap's QUIC ClientHellos tshark lacks whose Initial has the Destination Connection ID of
    an earlier ClientHello both found, on the same ports from another client address, with the
    same SNI and ALPN (category tshark_quic_copy_after_nat)."""
    left = [i for i in range(len(m)) if m.at[i, "category"] == "unexplained"
            and m.at[i, "differs"] == "missing_in_tshark" and m.at[i, "side"] == "ch"
            and m.at[i, "transport_w"] == "quic"]
    if not left:
        return
    cands = {i: [j for j in range(len(m)) if m.at[j, "side"] == "ch" and m.at[j, "how"] == "both"
                 and m.at[j, "transport_w"] == "quic"
                 and int(m.at[j, "frame"]) < int(m.at[i, "frame"])
                 and (m.at[j, "sport_w"], m.at[j, "dst_w"], m.at[j, "dport_w"])
                 == (m.at[i, "sport_w"], m.at[i, "dst_w"], m.at[i, "dport_w"])
                 and m.at[j, "src_w"] != m.at[i, "src_w"]
                 and all(_same(f, m.at[i, f + "_w"], m.at[j, f + "_w"]) for f in ("sni", "alpn"))]
             for i in left}
    frames = sorted({int(m.at[k, "frame"]) for i, js in cands.items() if js for k in [i] + js})
    if not frames:
        return
    fields = ["frame.number", "quic.dcid"]
    cmd = [tshark, "-n", "-r", path, "-Y", " or ".join(f"frame.number == {f}" for f in frames),
           "-T", "fields", "-E", f"separator={_SEP}", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    dcid = {int(r["frame.number"]): r["quic.dcid"] for r in run_fields(cmd, fields, path)}
    for i, js in cands.items():
        d = dcid.get(int(m.at[i, "frame"]))
        if d and any(dcid.get(int(m.at[j, "frame"])) == d for j in js):
            m.at[i, "category"] = "tshark_quic_copy_after_nat"


def _rejoin_quic(m: pd.DataFrame) -> None:
    """QUIC hellos both sides found on the same connection, equal in every compared field, whose
    first frame differs (webtap: the first Initial that carried CRYPTO bytes of the hello;
    tshark: the frames whose CRYPTO bytes its reassembly used): one category, both rows."""
    un = [i for i in range(len(m)) if m.at[i, "category"] == "unexplained"]
    left = [i for i in un if m.at[i, "differs"] == "missing_in_tshark"]
    right = [i for i in un if m.at[i, "differs"] == "missing_in_webtap"]
    for i in left:
        for j in right:
            if m.at[j, "category"] != "unexplained" or m.at[i, "side"] != m.at[j, "side"]:
                continue
            if (m.at[i, "src_w"], m.at[i, "sport_w"], m.at[i, "dst_w"], m.at[i, "dport_w"]) != (
                    m.at[j, "src_t"], m.at[j, "sport_t"], m.at[j, "dst_t"], m.at[j, "dport_t"]):
                continue
            if all(_same(f, m.at[i, f + "_w"], m.at[j, f + "_t"]) for f in _CMP[m.at[i, "side"]]):
                m.at[i, "category"] = m.at[j, "category"] = "quic_first_frame_differs"
                break
    # a client that sends its ClientHello again after a Retry or a Version Negotiation (new
    # Initial keys, CRYPTO offset 0 again): tshark's per-connection CRYPTO reassembly takes the
    # second copy for a retransmission and shows one ClientHello
    for i in left:
        if m.at[i, "category"] != "unexplained" or m.at[i, "side"] != "ch" or m.at[i, "transport_w"] != "quic":
            continue
        for j in range(len(m)):
            if (j != i and m.at[j, "side"] == "ch" and m.at[j, "how"] != "left_only"
                    and (m.at[j, "src_t"], m.at[j, "sport_t"], m.at[j, "dst_t"], m.at[j, "dport_t"])
                    == (m.at[i, "src_w"], m.at[i, "sport_w"], m.at[i, "dst_w"], m.at[i, "dport_w"])
                    and int(m.at[j, "frame"]) < int(m.at[i, "frame"])
                    and all(_same(f, m.at[i, f + "_w"], m.at[j, f + "_t"]) for f in ("sni", "alpn"))):
                m.at[i, "category"] = "tshark_quic_hello_resent"
                break


def _record_continues(f: dict) -> bool:
    """The segment starts a TLS handshake record longer than the segment's payload."""
    pl = f.get("payload", "")
    return len(pl) >= 10 and pl[:2] == "16" and int(pl[6:10], 16) + 5 > f.get("tcp_len", 0)


_BROKEN = ("incomplete", "too_long", "malformed", "reassembly_cap")


def tshark_frame_flags(path: str, frames: list[int], tshark: str = "tshark") -> dict:
    """tshark's TCP analysis flags of some frames: {frame: {out_of_order, retransmission}}"""
    fields = ["frame.number", "tcp.analysis.out_of_order", "tcp.analysis.retransmission",
              "frame.protocols", "tcp.payload", "tcp.len", "udp.payload", "_ws.expert.message"]
    cmd = [tshark, "-n", "-r", path, "-o", "tcp.desegment_tcp_streams:TRUE", "-Y",
           " or ".join(f"frame.number == {f}" for f in frames), "-T", "fields",
           "-E", f"separator={_SEP}"]
    for f in fields:
        cmd += ["-e", f]
    return {int(r["frame.number"]): {"out_of_order": bool(r["tcp.analysis.out_of_order"]),
                                     "retransmission": bool(r["tcp.analysis.retransmission"]),
                                     "protocols": r["frame.protocols"],
                                     "payload": r["tcp.payload"][:16].replace(":", ""),
                                     "tcp_len": int(r["tcp.len"] or 0),
                                     # first byte of the datagram: a long header with the
                                     # fixed bit cleared (RFC 9287 greasing)
                                     "quic_bits": [r["udp.payload"][:2]] if r["udp.payload"] else [],
                                     "expert": r["_ws.expert.message"]}
            for r in run_fields(cmd, fields, path)}


def _quic_keys_known(version) -> bool:
    """QUIC versions whose Initial keys webtap derives (ext/tls/quic_crypto.h: v1, v2, draft-29)."""
    try:
        v = int(str(version), 0)
    except ValueError:
        return False
    return v in (0x00000001, 0x6B3343CF, 0xFF00001D)


def _encapsulated(protos: str) -> bool:
    """frame.protocols shows the TCP segment (or QUIC datagram) inside a tunnel or a shim webtap
    does not open (_ENCAPS) before tcp / udp."""
    layers = protos.split(":")
    pre = layers[:layers.index("tcp")] if "tcp" in layers else layers
    return any(x in _ENCAPS for x in pre)


def _same(f, a, b) -> bool:
    na = a is None or (isinstance(a, float) and pd.isna(a)) or a == ""
    nb = b is None or (isinstance(b, float) and pd.isna(b)) or b == ""
    if na or nb:
        return na and nb
    return str(a) == str(b)


def compare_tls(traces, tshark: str = "tshark", gc_timeout: float = 60.0,
                warnings: list | None = None) -> TlsComparison:
    frames = [compare_tls_trace(p, tshark=tshark, gc_timeout=gc_timeout, warnings=warnings)
              for p in traces]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return TlsComparison(rows=rows, files=list(traces))


def build_parser():
    ap = argparse.ArgumentParser(
        prog="httpanalyzer compare --tls",
        description="Compare webtap's TLS handshakes with tshark's; every difference gets a "
                    "category.",
        epilog="Exit codes: 0 compared; 1 a trace could not be read or tshark failed (one line "
               "naming it); 2 usage error; 130/143 interrupted by SIGINT/SIGTERM. "
               "See docs/CLI.md.")
    ap.add_argument("traces", nargs="+", metavar="TRACE",
                    help="pcap / pcapng files (gzip'd too), each compared on its own")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ap.add_argument("--csv", metavar="OUT", help="write the per-hello rows as CSV")
    ap.add_argument("--tshark", default="tshark", metavar="PATH",
                    help="tshark binary (default: on PATH)")
    ap.add_argument("--keylog", metavar="FILE", action="append",
                    help="the traces' TLS session keys (NSS key log, as SSLKEYLOGFILE writes "
                         "it; repeat for several files, their keys are merged): also compare webtap's exchanges (--exchanges-out) with the "
                         "decrypted truth, per trace (httpanalyzer.compare_exchanges; needs "
                         "the `cryptography` package: pip install 'webtap[verify]')")
    clikit.add_gc_timeout(ap, "a hello of webtap's records")
    clikit.add_common(ap)
    clikit.files(ap, inputs=("traces", "keylog"), outputs=("csv",))
    return ap


def _handle(a, run) -> int:
    o = run.output(a.csv, raw=True) if a.csv else None
    for p in a.traces:
        if not os.path.exists(p):
            raise clikit.RunError(f"No such file or directory, {p}")
        if os.path.isdir(p):
            raise clikit.RunError(f"Is a directory, {p}")
        if os.path.isfile(p):
            with open_trace(p):        # NotACapture, an empty file: one line, exit 1
                pass
    damage: list = []
    exchanges = []
    try:
        c = compare_tls(a.traces, tshark=a.tshark, gc_timeout=a.gc_timeout, warnings=damage)
        if a.keylog is not None:
            exchanges = [compare_exchanges(p, a.keylog, tshark=a.tshark, gc_timeout=a.gc_timeout)
                         for p in a.traces]
    except (TsharkError, TruthError) as e:
        raise clikit.RunError(clikit.describe(e)) from None
    except subprocess.CalledProcessError as e:
        raise clikit.RunError(f"{e.cmd[0]} exited with status {e.returncode}") from None
    finally:
        run.warn_traces(damage)
    if o is not None:
        c.rows.drop(columns=["how"], errors="ignore").to_csv(o.target, index=False)
        o.commit()
    s = c.summary()
    if a.keylog is not None:
        s["exchanges"] = exchanges
    if a.json:
        print(json.dumps(s))
    else:
        print(f"{s['files']} files, {s['hellos']} hellos")
        for k, v in sorted(s["categories"].items()):
            print(f"  {k:28s} {v}")
        un = c.rows[c.rows["category"] == "unexplained"] if len(c.rows) else c.rows
        for r in un.head(50).itertuples(index=False):
            print(f"  unexplained: {r.file} frame {r.frame} {r.side}: {r.differs}")
        if exchanges:
            print("exchanges against the decrypted truth (--keylog):")
            for r in exchanges:
                print("\n".join("  " + ln for ln in summary_lines(r)))
    return 0


def cli(argv=None, parts=None) -> int:  # parts: httpanalyzer.cli.Parts (unused here)
    """`httpanalyzer compare --tls TRACE... [--keylog FILE] [--json] [--csv OUT]` (the
    webtap.clikit contract)."""

    return clikit.main("httpanalyzer compare --tls", build_parser(), _handle, argv)
