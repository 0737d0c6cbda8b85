#!/usr/bin/env python3
"""Real kube-scheduler v1.36.2 places the partitionable scenario's pods (claims made by
hand: no controller-manager) while `gantry run --shadow` decides each and compares."""
import json, ssl, sys, time, subprocess, urllib.request, urllib.error, yaml, os, signal
R = "/work/realapi"; API = "https://127.0.0.1:6443"
TOKEN = open(f"{R}/admin.token").read().strip()
CTX = ssl.create_default_context(cafile=f"{R}/pki/ca.crt")
def req(method, path, body=None, ctype="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(API + path, data=data, method=method,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": ctype})
    try:
        with urllib.request.urlopen(r, context=CTX) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{method} {path} -> {e.code}: {e.read().decode()[:800]}")
scen = sys.argv[1]
cluster = yaml.safe_load(open(f"{scen}/cluster.yaml"))["items"]
steps = yaml.safe_load(open(f"{scen}/steps.yaml"))["items"]
templates = {}
now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
for o in cluster:
    k = o["kind"]
    if k == "Node":
        o["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake",
                                      "lastHeartbeatTime": now, "lastTransitionTime": now}]
        req("POST", "/api/v1/nodes", o)
    elif k == "DeviceClass":
        req("POST", "/apis/resource.k8s.io/v1/deviceclasses", o)
    elif k == "ResourceSlice":
        req("POST", "/apis/resource.k8s.io/v1/resourceslices", o)
    elif k == "ResourceClaimTemplate":
        templates[o["metadata"]["name"]] = o["spec"]["spec"]
for n in [o["metadata"]["name"] for o in cluster if o["kind"] == "Node"]:
    got = req("GET", f"/api/v1/nodes/{n}")
    if got["spec"].get("taints"):
        req("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}, ctype="application/merge-patch+json")
env = dict(os.environ)
mode = sys.argv[3] if len(sys.argv) > 3 else "shadow"
args = ["--shadow", "--disagreements", "/tmp/realdra/disagreements.jsonl"] if mode == "shadow" else ["--scheduler-name", "gantry"]
gantry = subprocess.Popen([sys.argv[2], "run", "--kubeconfig", f"{R}/kubeconfig", "--emulated-version", "1.36",
    "--metrics-addr", "127.0.0.1:19251"] + args, stderr=open(f"/tmp/realdra/gantry-{mode}.log", "w"))
time.sleep(3)
for p in steps:
    name = p["metadata"]["name"]
    rc = p["spec"]["resourceClaims"][0]
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"{name}-gpu", "namespace": "default"}, "spec": templates[rc["resourceClaimTemplateName"]]}
    req("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim)
    p["spec"]["resourceClaims"] = [{"name": rc["name"], "resourceClaimName": f"{name}-gpu"}]
    if mode != "shadow":
        p["spec"]["schedulerName"] = "gantry"
    req("POST", "/api/v1/namespaces/default/pods", p)
    time.sleep(2)
time.sleep(4)
out = []
for p in steps:
    name = p["metadata"]["name"]
    got = req("GET", f"/api/v1/namespaces/default/pods/{name}")
    cl = req("GET", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}-gpu")
    alloc = cl.get("status", {}).get("allocation")
    devs = [r["device"] for r in alloc["devices"]["results"]] if alloc else None
    reason = None
    for c in got["status"].get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "False":
            reason = c.get("message")
    out.append({"pod": f"default/{name}", "node": got["spec"].get("nodeName"), "devices": devs, "reason": reason})
    print(json.dumps(out[-1]))
metrics = urllib.request.urlopen("http://127.0.0.1:19251/metrics").read().decode()
print("\n".join(l for l in metrics.splitlines() if l.startswith("gantry_shadow")))
gantry.send_signal(signal.SIGTERM); gantry.wait(timeout=30)
