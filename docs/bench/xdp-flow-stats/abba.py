#!/usr/bin/env python3
# npf-xdp-bench before/after with the main/baseline slot bias cancelled (docs/BENCHMARKS.md,
# "Per-flow XDP counters"): DIR holds new-main-N.json (the new build, --baseline the old
# program's object) and old-main-N.json (a bench built with the old program, --baseline the
# new object). Per pair and config, new/old = sqrt(r1 / r2) of the per-call ratios.
# Usage: abba.py DIR
import json, glob, sys, math, statistics as st
d = sys.argv[1]
def rows(f):
    j = json.load(open(f)); return {(x["config"].replace("baseline ", ""), x["baseline"]): x for x in j["rows"]}
pairs = []
for f in sorted(glob.glob(d + "/new-main-*.json")):
    g = f.replace("new-main", "old-main")
    try: pairs.append((rows(f), rows(g)))
    except Exception as e: print("skip", f, e)
cfgs = [c for (c, b) in pairs[0][0] if not b and pairs[0][0][(c, False)]["overBaselinePerCall"] is not None]
print("pairs:", len(pairs))
print("%-20s %9s %9s %9s %8s %8s %8s %8s %8s  %s" % ("config", "old ns", "new ns", "new-old", "ratio", "lo", "hi",
                                                     "old p10", "new p10", "per pair"))
for c in cfgs:
    ratios, olds, news, olds10, news10 = [], [], [], [], []
    for a, b in pairs:
        r1 = a[(c, False)]["overBaselinePerCall"]; r2 = b[(c, False)]["overBaselinePerCall"]
        ratios.append(math.sqrt(r1 / r2))
        news += [a[(c, False)]["nsMedian"], b[(c, True)]["nsMedian"]]
        olds += [a[(c, True)]["nsMedian"], b[(c, False)]["nsMedian"]]
        news10 += [a[(c, False)]["nsP10"], b[(c, True)]["nsP10"]]
        olds10 += [a[(c, True)]["nsP10"], b[(c, False)]["nsP10"]]
    ratios.sort()
    o, n = st.median(olds), st.median(news)
    m = st.median(ratios)
    print("%-20s %9.1f %9.1f %9.1f %8.4f %8.4f %8.4f %8.1f %8.1f  %s" % (c, o, n, o * (m - 1), m, ratios[0], ratios[-1],
          st.median(olds10), st.median(news10), " ".join("%.3f" % r for r in ratios)))
