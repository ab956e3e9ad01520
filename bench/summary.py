"""Markdown tables of a bench/run result directory (for docs/BENCHMARKS.md).

    python3 bench/summary.py target/bench
"""

import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ms(v):
    return "–" if v is None else f"{v:.1f}"


def throughput(d):
    out = ["### Throughput (wrk -t1, medians of alternating rounds)", ""]
    out.append(f"{d['rounds']} rounds of {d['seconds']} s, {d['connections']} connections, "
               f"a line of {d['line']} for the poll and page rows; threads = {d['threads']}, "
               f"work-stealing = {str(d['work_stealing']).lower()}.")
    out += ["", "| kind | req/s | ÷ nginx proxy_pass | CPU µs per request |", "|---|---:|---:|---:|"]
    nginx = d["rps"]["nginx"]["median"]
    for k, v in d["rps"].items():
        out.append(f"| {k} | {v['median']:.0f} | {v['median'] / nginx:.2f} | {v['cpu_us_per_request']:.1f} |")
    t, c = d["redis_round_trips_per_request"], d["redis_commands_in_scripts_per_request"]
    out += ["", "| Redis per request | admitted | status poll | waiting page | new visitor |", "|---|---:|---:|---:|---:|"]
    out.append("| round trips | " + " | ".join(f"{t[k]:.2f}" for k in ("admitted", "poll", "page", "join")) + " |")
    out.append("| commands inside the scripts | " + " | ".join(f"{c[k]:.2f}" for k in ("admitted", "poll", "page", "join")) + " |")
    j = d["join_rps"]
    out += ["", f"New visitors joining over HTTP (a fresh id per request): memory {j['memory']:.0f} req/s, Redis {j['redis']:.0f} req/s."]
    return out


def scale(d):
    return ["### Redis scale", "",
            f"- {d['waiting']} waiting: {d['bytes_per_waiting_visitor']:.1f} bytes per waiting visitor (target ≤ 150)",
            f"- redis-benchmark, EVALSHA `return 1`: {d['evalsha_nop_rps']:.0f} req/s; status poll (join script, in line): "
            f"{d['poll_rps']:.0f} req/s = {d['poll_ratio']:.2f}×; join (a new visitor): {d['join_rps']:.0f} req/s = {d['join_ratio']:.2f}×"]


def flash(runs, title):
    out = ["### " + title, "",
           "| | " + " | ".join(r["label"] for r in runs) + " |",
           "|---|" + "---:|" * len(runs)]

    def row(name, f):
        out.append(f"| {name} | " + " | ".join(f(r) for r in runs) + " |")

    row("visitors arrived / ordered / lost", lambda r: f"{r['visitors']['arrived']} / {r['visitors']['ordered']} / {r['visitors']['lost']}")
    row("origin errors (shop 5xx)", lambda r: str(r["shop"]["errors_5xx"]))
    row("shop: most orders in flight (40 workers)", lambda r: str(r["shop"]["max_in_flight"]))
    row("shop: order latency p50 / p99 ms", lambda r: f"{ms(r['shop']['order_latency_ms']['p50'])} / {ms(r['shop']['order_latency_ms']['p99'])}")

    def adm(f):
        return lambda r: f(r["admission"]) if r.get("admission") else "–"

    row("admissions/s: configured → measured (error)", adm(lambda a: f"{a['configured_rate']:.0f} → {a['measured_rate']:.1f} ({a['rate_error_percent']:+.1f} % over {a['window_s']:.0f} s)"))
    row("most admitted in 100 ms (limit)", adm(lambda a: f"{a['max_in_100ms']} ({a['max_in_100ms_limit']})"))
    row("FIFO inversions (of visitors who waited)", lambda r: f"{r['fifo_inversions']} ({r['fifo_checked']})")
    for cls, name in (("waiting_page", "waiting page"), ("status_poll", "status poll"),
                      ("admitted_request", "admitted request"), ("direct_request", "straight to the shop")):
        row(f"{name} p50 / p99 ms (n)", lambda r, c=cls: (
            f"{ms(r['latency_ms'][c]['p50'])} / {ms(r['latency_ms'][c]['p99'])} ({r['latency_ms'][c]['count']})"
            if r["latency_ms"].get(c) and r["latency_ms"][c]["count"] else "–"))
    row("load tool stalls > 100 ms", lambda r: str(r.get("load_tool", {}).get("lags_over_100ms", "–")))
    row("run time s", lambda r: f"{r['duration_s']:.0f}")
    return out


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "target/bench"
    lines = []
    t = load(os.path.join(base, "throughput.json"))
    if t:
        lines += throughput(t) + [""]
    s = load(os.path.join(base, "redis-scale.json"))
    if s:
        lines += scale(s) + [""]
    for sub, title in (("flash-sale", "Flash sale"), ("flash-sale-ramp", "Flash sale, arrivals on a ramp"),
                       ("flash-sale-ramp-t1", "Flash sale on the ramp, three instances at threads = 1")):
        runs = [r for r in (load(p) for p in sorted(glob.glob(os.path.join(base, sub, "*.json")))) if r]
        if runs:
            lines += flash(runs, title) + [""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
