#!/usr/bin/env python3
"""npf-sidecar / npf per scenario over the rounds of docs/BENCHMARKS.md
("npfd: the cost of the process boundary"): python3 ratios.py round-*.json"""
import json
import statistics
import sys

rows = {}  # (scenario, releaseMin) -> list of (npf run, sidecar run)
for path in sys.argv[1:]:
    j = json.load(open(path))
    rel = j["config"].get("releaseMinBytes", 0)
    for name, sc in j["scenarios"].items():
        runs = {r["contender"]: r for r in sc.get("runs", [])}
        if "npf" in runs and "npf-sidecar" in runs:
            rows.setdefault((name, rel), []).append((runs["npf"], runs["npf-sidecar"]))


def med(v):
    return statistics.median(v) if v else float("nan")


print(f"{'scenario':<10} {'release':>8} {'n':>2} {'npf Mpps':>9} {'side Mpps':>9} {'pps s/n':>8} "
      f"{'npf ns/p':>9} {'side ns/p':>9} {'cpu s/n':>8} {'npf lost%':>9} {'side lost%':>10} {'npf p50us':>9} "
      f"{'side p50us':>10}")
for (name, rel), pairs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    pps = [s["pps"] / n["pps"] for n, s in pairs if n["pps"] > 0]
    cpu = [s["rxCpuNsPerPacket"] / n["rxCpuNsPerPacket"] for n, s in pairs if n["rxCpuNsPerPacket"] > 0]
    lost = lambda r: 100.0 * r["lost"] / r["sent"] if r["sent"] else 0.0
    print(f"{name:<10} {('every' if rel == 0 else str(rel >> 20) + 'M'):>8} {len(pairs):>2} "
          f"{med([n['pps'] for n, _ in pairs]) / 1e6:>9.3f} {med([s['pps'] for _, s in pairs]) / 1e6:>9.3f} "
          f"{med(pps):>8.3f} {med([n['rxCpuNsPerPacket'] for n, _ in pairs]):>9.0f} "
          f"{med([s['rxCpuNsPerPacket'] for _, s in pairs]):>9.0f} {med(cpu):>8.3f} "
          f"{med([lost(n) for n, _ in pairs]):>9.2f} {med([lost(s) for _, s in pairs]):>10.2f} "
          f"{med([n['latencyNs']['p50'] for n, _ in pairs]) / 1e3:>9.0f} "
          f"{med([s['latencyNs']['p50'] for _, s in pairs]) / 1e3:>10.0f}")
    print(f"{'':<10} {'':>8}    pps ratios: {' '.join(f'{x:.2f}' for x in pps)}")
