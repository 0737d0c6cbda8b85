#!/usr/bin/env python3
"""Records a burst of pods created at once on a real control plane, and when each was bound.

    python3 record.py <nodes> <pods> <out.jsonl> [<pods that fit nowhere>]

Expects kube-apiserver at https://127.0.0.1:6443 (files in $REALAPI, default /work/realapi:
`admin.token`, `pki/ca.crt`) with nothing in it, and a scheduler running against it (real
kube-scheduler, or `gantry run`). Creates <nodes> nodes (32 cpu, 128Gi, 110 pods, Ready, one
zone), waits a few seconds for the scheduler to see them, then creates <pods> pods (100m cpu,
128Mi, no labels) from 16 threads as fast as the API server takes them. One watch of the
pods, started before the first is created, sees each pod arrive and be bound: both times
are taken from it (the stream the scheduler's own informer reads), relative to the first
arrival, and written per pod in binding order:

    {"pod": "p-00042", "arrived_ms": 12.3, "bound_ms": 2107.9, "node": "n-017"}

With a fourth argument, that many pods asking for 64 cpu (more than any node has) are
created first, `x-00000` on; the time each gets its `PodScheduled=False` condition is
written instead, after the bound pods:

    {"pod": "x-00007", "arrived_ms": 3.1, "failed_ms": 40.2}
"""
import json, os, ssl, sys, threading, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

R = os.environ.get("REALAPI", "/work/realapi")
API = "https://127.0.0.1:6443"
TOKEN = open(f"{R}/admin.token").read().strip()
CTX = ssl.create_default_context(cafile=f"{R}/pki/ca.crt")


def req(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(API + path, data=data, method=method,
                               headers={"Authorization": f"Bearer {TOKEN}",
                                        "Content-Type": "application/json"})
    with urllib.request.urlopen(r, context=CTX, timeout=60) as resp:
        return json.loads(resp.read() or b"{}")


nodes, pods, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
nofit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
for i in range(nodes):
    name = f"n-{i:03d}"
    req("POST", "/api/v1/nodes", {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              "topology.kubernetes.io/zone": "z1"}},
        "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "fake", "lastHeartbeatTime": now,
                                   "lastTransitionTime": now}]}})
    # The API server's admission taints a new node not ready; no kubelet clears it.
    node = req("GET", f"/api/v1/nodes/{name}")
    if node["spec"].get("taints"):
        node["spec"]["taints"] = None
        req("PUT", f"/api/v1/nodes/{name}", node)
time.sleep(5)

arrived, bound, order, failed = {}, {}, [], {}
start = [None]
rv = req("GET", "/api/v1/namespaces/default/pods")["metadata"]["resourceVersion"]
done = threading.Event()


def watch():
    r = urllib.request.Request(
        API + f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}",
        headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(r, context=CTX, timeout=600) as stream:
        for line in stream:
            at = time.monotonic()
            pod = json.loads(line)["object"]
            name = pod["metadata"]["name"]
            if start[0] is None:
                start[0] = at
            arrived.setdefault(name, at)
            node = pod["spec"].get("nodeName")
            if node and name not in bound:
                bound[name] = (at, node)
                order.append(name)
            conditions = pod.get("status", {}).get("conditions") or []
            if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions):
                failed.setdefault(name, at)
            if len(bound) == pods and len(failed) == nofit:
                done.set()
                return


threading.Thread(target=watch, daemon=True).start()
time.sleep(1)


def create(which):
    name, cpu = which
    req("POST", "/api/v1/namespaces/default/pods", {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}})


with ThreadPoolExecutor(16) as pool:
    list(pool.map(create, [(f"x-{i:05d}", "64") for i in range(nofit)]
                  + [(f"p-{i:05d}", "100m") for i in range(pods)]))
if not done.wait(timeout=600):
    sys.exit(f"only {len(bound)} of {pods} pods bound, {len(failed)} of {nofit} failed, within 600 s")
with open(out, "w") as f:
    for name in order:
        at, node = bound[name]
        f.write(json.dumps({"pod": name, "arrived_ms": round((arrived[name] - start[0]) * 1000, 1),
                            "bound_ms": round((at - start[0]) * 1000, 1), "node": node}) + "\n")
    for name in sorted(failed, key=failed.get):
        f.write(json.dumps({"pod": name, "arrived_ms": round((arrived[name] - start[0]) * 1000, 1),
                            "failed_ms": round((failed[name] - start[0]) * 1000, 1)}) + "\n")
last = bound[order[-1]][0] - start[0]
print(f"{pods} pods on {nodes} nodes: last bound at {last:.2f} s, "
      f"{pods / last:.1f} pods/s from the first arrival")
