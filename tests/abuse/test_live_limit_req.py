"""THE REAL TEST of issue 34's limit_req simulation: real nginx (Debian's 1.22) with limit_req in a
network namespace, three clients at known rates in three others (tests/abuse/live.py), captured
by tcpdump on the server's interface. Given only the capture and each configuration, the
simulation (httpanalyzer.abuse.limit_req) must name the requests nginx rejected (its 503s in the
capture) and those it delayed, and the excess nginx logged for each of them (its error log's
"limiting requests, excess: X.XXX" and "delaying request, excess: X.XXX" lines).

Configurations, one zone keyed by $binary_remote_addr each, one server port each (so that they do
not share state), served from a static file (limit_req runs in the preaccess phase: a `return`
would answer before it):

    8001  rate=10r/s                       (no burst: anything faster than 100 ms apart is 503)
    8002  rate=10r/s burst=5               (excess up to 5 delayed, beyond that 503)
    8003  rate=10r/s burst=5 nodelay       (up to 5 at once, none delayed)
    8004  rate=4r/s  burst=4 delay=2       (two-stage: 2 at once, then delayed, then 503)

Clients: c0 at 25 r/s for 2 s (irregular spacing, no exact leak ties), c1 at about 8 r/s, c2 in
two bursts of 12 requests 2 ms apart, 1.1 s between the bursts; every request to every port on its
own connection. The agreement per configuration is printed and docs/ABUSE.md reports it.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from live import Lab, missing  # noqa: E402

from httpanalyzer import abuse  # noqa: E402

why = missing()
pytestmark = [pytest.mark.live, pytest.mark.skipif(why is not None, reason=why or "")]

CONFIGS = {
    8001: dict(rate="10r/s", burst=0, nodelay=False, delay=None),
    8002: dict(rate="10r/s", burst=5, nodelay=False, delay=None),
    8003: dict(rate="10r/s", burst=5, nodelay=True, delay=None),
    8004: dict(rate="4r/s", burst=4, nodelay=False, delay=2),
}


def _directive(port: int, c: dict) -> str:
    extra = (f" burst={c['burst']}" if c["burst"] else "") + (" nodelay" if c["nodelay"] else "")
    extra += f" delay={c['delay']}" if c["delay"] is not None else ""
    return (f"    limit_req_zone $binary_remote_addr zone=z{port}:1m rate={c['rate']};\n"
            f"    server {{ listen {{ip}}:{port}; location / {{ limit_req zone=z{port}{extra}; }} }}\n")


NGINX_HTTP = "".join(_directive(p, c) for p, c in CONFIGS.items())


def _offsets() -> dict[str, list[float]]:
    rng = np.random.default_rng(34)
    c0 = np.cumsum(rng.uniform(0.030, 0.050, 50))            # ~25 r/s
    c1 = np.cumsum(rng.uniform(0.110, 0.140, 16))            # ~8 r/s
    burst = np.arange(12) * 0.002
    c2 = np.concatenate([burst, 1.1 + burst])
    return {"c0": list(c0), "c1": list(c1), "c2": list(c2)}


_LOG = re.compile(r'(limiting requests|delaying request), excess: ([0-9.]+),? by zone "z(\d+)".*'
                  r'request: "GET /r\?c=(c\d)&i=(\d+) ')


def run_lab(work: Path) -> tuple[Path, list[dict], str]:
    """Run the clients against nginx under tcpdump; (pcap, client results, nginx error log)."""
    offs = _offsets()
    pcap = work / "limit_req.pcap"
    with Lab(len(offs), work) as lab:
        lab.nginx(NGINX_HTTP)
        for attempt in range(2):
            td = lab.tcpdump(pcap)
            start = time.time() + 1.0
            ports = ",".join(map(str, CONFIGS))
            procs = [lab.peer(i, "schedule", lab.server_ip, ports, f"{start:.6f}",
                              ",".join(f"{o:.6f}" for o in offs[tag]), tag)
                     for i, tag in enumerate(offs)]
            results = []
            for tag, p in zip(offs, procs):
                out, err = p.communicate(timeout=60)
                assert p.returncode == 0, err
                results += [dict(json.loads(line), tag=tag) for line in out.splitlines()]
            if lab.stop_tcpdump(td) == 0:
                break
        else:
            raise RuntimeError("tcpdump dropped packets twice")
        log = (work / "error.log").read_text()
    return pcap, results, log


def agreement(pcap: Path, results: list[dict], log: str, clock_offset_us: int = 0) -> dict:
    """Per configuration: requests, what nginx did (503s in the capture, delays in its log) and
    how many the simulation got right."""
    run = abuse.collect(str(pcap))
    req = run.requests
    logged = {}
    for m in _LOG.finditer(log):
        kind = "rejected" if m.group(1).startswith("limiting") else "delayed"
        logged[(int(m.group(3)), m.group(4), int(m.group(5)))] = (kind, float(m.group(2)))
    ids = req["uri"].astype(str).str.extract(r"c=(c\d)&i=(\d+)")
    req = req.assign(tag=ids[0], i=ids[1].astype(float))
    out = {}
    for port, conf in CONFIGS.items():
        r = req[req["server_port"].astype(int) == port]
        sim = abuse.limit_req(r, clock_offset_us=clock_offset_us, **conf)
        truth_rej = (sim["status"].astype("Int64") == 503).fillna(False).to_numpy(bool)
        sim_rej = (sim["limit_req"] == "rejected").to_numpy()
        keys = [(port, t, int(i)) for t, i in zip(sim["tag"], sim["i"])]
        truth_kind = np.array([logged.get(k, ("passed", 0.0))[0] for k in keys])
        truth_exc = np.array([logged.get(k, ("passed", 0.0))[1] for k in keys])
        sim_kind = sim["limit_req"].astype(str).to_numpy()
        logged_rows = truth_kind != "passed"
        out[port] = {
            "requests": len(sim),
            "nginx_rejected": int(truth_rej.sum()),
            "nginx_delayed": int((truth_kind == "delayed").sum()),
            "status_agree": int((truth_rej == sim_rej).sum()),
            "outcome_agree": int((truth_kind == sim_kind).sum()),
            "excess_agree": int((np.round(sim["excess"].to_numpy()[logged_rows], 3)
                                 == truth_exc[logged_rows]).sum()),
            # the simulation's excess minus nginx's, in ms of the zone's leak (rate / 1000 per ms)
            "excess_ms_off": sorted(np.round((sim["excess"].to_numpy()[logged_rows]
                                              - truth_exc[logged_rows]) * 1000
                                             / (abuse.parse_rate(conf["rate"]) / 1000), 3).tolist()),
            "logged": int(logged_rows.sum()),
            "log_vs_capture": int((truth_rej == (truth_kind == "rejected")).sum()),
            "mismatch": [k for k, a, b in zip(keys, truth_kind, sim_kind) if a != b],
        }
        out[port].update(_categorise(sim, keys, truth_kind, truth_exc, sim_kind, conf))
        # the delays: nginx answers a delayed request after its timer, delay_ms after reading
        # it (its ms clock: up to 1 ms early against the capture), never before
        both = (truth_kind == "delayed") & (sim_kind == "delayed")
        rt_ms = sim["response_time"].to_numpy("timedelta64[ns]").astype(np.int64)[both] / 1e6
        late = rt_ms - sim["delay_ms"].to_numpy()[both]
        out[port]["delayed_both"] = int(both.sum())
        out[port]["delay_not_early"] = int((late >= -2).sum())
        out[port]["delay_late_ms_median"] = float(np.median(late)) if len(late) else None
    out["_sent"] = len(results)
    return out


#: a decision this close to a threshold (in ms of the zone's leak) can go either way between
#: nginx's clock and the capture's: nginx reads its ms clock when its event loop wakes, some
#: tenths of a ms after the packet was captured, and its ticks are not the capture's
CLOCK_MS = 3


def _categorise(sim, keys, truth_kind, truth_exc, sim_kind, conf) -> dict:
    """Why each disagreement, in request order per client:

    * "clock": the simulation's excess was within CLOCK_MS ms of leak of the threshold it fell
      on (burst for rejected, delay for delayed);
    * "late": within (lag + CLOCK_MS) ms of it, where lag is how long after its capture nginx
      answered the request, less the delay nginx gave it (the capture's own evidence that nginx
      read it that late: a loaded machine);
    * "after": a later request of a client whose two buckets have diverged that way;
    * "unexplained": none of these.
    And the excess nginx logged, for a request of a client not diverged: off by at most
    CLOCK_MS + the largest lag of this request and the client's earlier accounted ones (the
    excess telescopes back to the last time the bucket was empty: its error is the difference of
    two lags; "excess_unexplained" counts the others)."""
    leak = abuse.parse_rate(conf["rate"]) / 1000            # milli-requests per ms
    exc = np.round(sim["excess"].to_numpy() * 1000)
    nginx_exc = np.round(truth_exc * 1000)
    dlim = 1000 * (conf["delay"] or 0)
    nginx_delay = np.where(truth_kind == "delayed", np.maximum(nginx_exc - dlim, 0) * 1000
                           // abuse.parse_rate(conf["rate"]), 0)
    rt = sim["response_time"].to_numpy("timedelta64[ns]").astype(np.int64) / 1e6
    lag = np.maximum(rt - nginx_delay, 0)
    limits = [1000 * conf["burst"]]
    if not conf["nodelay"]:
        limits.append(dlim)
    cats = {"clock": 0, "late": 0, "after": 0, "unexplained": 0, "excess_unexplained": 0,
            "max_lag_ms": float(np.max(lag)) if len(lag) else 0.0}
    diverged = set()
    prev_lag: dict = {}
    for j in np.argsort(sim["request_ts"].astype("int64").to_numpy(), kind="stable"):
        client = keys[j][1]
        if truth_kind[j] != sim_kind[j]:
            dist = min(abs(exc[j] - lim) for lim in limits) / leak
            if dist <= CLOCK_MS:
                cats["clock"] += 1
            elif dist <= lag[j] + CLOCK_MS:
                cats["late"] += 1
            elif client in diverged:
                cats["after"] += 1
            else:
                cats["unexplained"] += 1
            diverged.add(client)
        elif truth_kind[j] != "passed" and client not in diverged:
            off = abs(exc[j] - nginx_exc[j]) / leak
            if off > CLOCK_MS + max(lag[j], prev_lag.get(client, 0.0)):
                cats["excess_unexplained"] += 1
        if truth_kind[j] != "rejected":
            prev_lag[client] = max(prev_lag.get(client, 0.0), lag[j])     # accounted ones
    return cats


def test_limit_req_matches_real_nginx(tmp_path):
    pcap, results, log = run_lab(tmp_path)
    assert len(results) == sum(len(v) for v in _offsets().values()) * len(CONFIGS)
    a = agreement(pcap, results, log)
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "excess_ms_off"}
                      if isinstance(v, dict) else v for k, v in a.items()}))
    for port, conf in CONFIGS.items():
        g = a[port]
        n = g["requests"]
        assert n == len(results) // len(CONFIGS), g        # every request in the capture
        assert g["log_vs_capture"] == n, g                  # nginx's log and its 503s agree
        # something to predict: every configuration rejects, the delaying ones delay
        assert g["nginx_rejected"] > 0, g
        if not conf["nodelay"] and conf["burst"] > (conf["delay"] or 0):
            assert g["nginx_delayed"] > 0, g
        # every disagreement is a decision within CLOCK_MS (or nginx's own lag) of a threshold,
        # or follows one for the same client
        assert g["unexplained"] == 0, (port, g)
        assert g["excess_unexplained"] == 0, (port, g)
        # how many there are depends on the machine's load (timing jitter of the clients and of
        # nginx near a threshold, then the "after" that follow): 0-2 of 90 when the machine is
        # calm, 30 of 90 once under heavy load (docs/ABUSE.md); they are reported, and only a
        # gross bound is asserted (the rules themselves are held exactly by test_abuse.py)
        assert g["outcome_agree"] >= 0.5 * n, (port, g)
        assert g["status_agree"] >= g["outcome_agree"], (port, g)
        assert g["delay_not_early"] == g["delayed_both"], (port, g)
        # the excess nginx logged: the same up to whole milliseconds of leak (nginx's clock ticks
        # in whole ms)
        off = np.asarray(g["excess_ms_off"])
        assert np.all(off == np.round(off)), (port, g)


if __name__ == "__main__":
    # python tests/abuse/test_live_limit_req.py: run the lab once and print the agreement
    with tempfile.TemporaryDirectory() as d:
        pcap, results, log = run_lab(Path(d))
        a = agreement(pcap, results, log)
        print(json.dumps(a, default=str, indent=1))
        if len(sys.argv) > 1:
            import shutil
            shutil.copy(pcap, sys.argv[1])
            Path(sys.argv[1] + ".log").write_text(log)
