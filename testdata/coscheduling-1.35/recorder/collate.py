#!/usr/bin/env python3
"""Collates the recorder's runs of each scenario into outcomes.json: every (node, reason)
each pod ended with, and every multiset of nodes bound, over the runs, with counts.

usage: collate.py <runs-dir> <scenarios-dir>
  <runs-dir>/run<N>/<scenario>/expected.jsonl, written by cosrecorder
"""
import json
import os
import sys
from collections import Counter

runs_dir, scenarios_dir = sys.argv[1], sys.argv[2]
runs = sorted(d for d in os.listdir(runs_dir) if d.startswith("run") and os.path.isdir(os.path.join(runs_dir, d)))
for scenario in sorted(os.listdir(scenarios_dir)):
    if not os.path.exists(os.path.join(scenarios_dir, scenario, "steps.yaml")):
        continue
    pods, bound, count = {}, Counter(), 0
    for run in runs:
        path = os.path.join(runs_dir, run, scenario, "expected.jsonl")
        if not os.path.exists(path):
            continue
        count += 1
        nodes = []
        for line in open(path):
            v = json.loads(line)
            if "pod" not in v:
                continue
            key = json.dumps({"node": v["node"], "reason": v["reason"]}, sort_keys=True)
            pods.setdefault(v["pod"], Counter())[key] += 1
            if v["node"] is not None:
                nodes.append(v["node"])
        bound[json.dumps(sorted(nodes))] += 1
    out = {
        "runs": count,
        "pods": {
            pod: [dict(json.loads(k), runs=n) for k, n in sorted(seen.items())]
            for pod, seen in sorted(pods.items())
        },
        "bound": [json.loads(k) for k, _ in sorted(bound.items())],
        "bound_runs": [n for _, n in sorted(bound.items())],
    }
    with open(os.path.join(scenarios_dir, scenario, "outcomes.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(scenario, count, "runs;", sum(len(s) for s in pods.values()), "pod outcomes")
