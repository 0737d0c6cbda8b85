#!/usr/bin/env python3
"""Replays a scenario of this directory against a real kube-apiserver v1.36 (no kubelet,
no controller-manager), and compares the outcome with the scenario's recording.

    python3 realapi.py <scenario-dir> <gantry> shadow   # kube-scheduler places, gantry run --shadow compares
    python3 realapi.py <scenario-dir> <gantry> run      # gantry run places (schedulerName gantry)
    python3 realapi.py taint-rules <gantry> run DRADeviceTaintRules=true   # gantry's --feature-gates

The control plane is expected at https://127.0.0.1:6443 with its files in $REALAPI
(default /work/realapi): `admin.token` (a token of system:masters, for this script),
`pki/ca.crt`, and `kubeconfig`, which gantry runs with (a token of the gantry-system/gantry-scheduler
service account: deploy/gantry.yaml, applied here as shipped, is all it may do).
Claims from templates are made here as the resourceclaim controller would make them,
`<pod>-<claim>`, and named by `resourceClaimName`, unless REALAPI_CONTROLLER=1 says a
kube-controller-manager runs its resourceclaim controller (it makes them and names them
in each pod's status); a claim for extended resources is the scheduler's own to make. Each pod's node or PodScheduled=False message is compared with
`expected.jsonl`, and each extended-resource claim with `claims.jsonl` where it has one;
the FailedScheduling events each pod got are printed beside it."""
import json, os, signal, subprocess, sys, time, urllib.request
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from realapi_client import RBAC_PATHS, R, apply_deploy, make_ready, req, untaint, create as create_at  # noqa: E402

PATHS = {
    "Node": "/api/v1/nodes",
    **RBAC_PATHS,
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "DeviceTaintRule": "/apis/resource.k8s.io/v1beta2/devicetaintrules",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
}
controller = os.environ.get("REALAPI_CONTROLLER") == "1"


def create(o, exists_ok=False):
    return create_at(PATHS, o, exists_ok)


scen, gantry_bin = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else "shadow"
gates = ["--feature-gates", sys.argv[4]] if len(sys.argv) > 4 else []
apply_deploy(PATHS)
cluster = yaml.safe_load(open(f"{scen}/cluster.yaml"))["items"]
steps = yaml.safe_load(open(f"{scen}/steps.yaml"))["items"]
templates = {}
for o in cluster:
    if o["kind"] == "Node":
        make_ready(o)
    if o["kind"] == "ResourceClaimTemplate":
        templates[o["metadata"]["name"]] = o["spec"]["spec"]
        if controller:
            create(o)
    else:
        create(o)
untaint([o["metadata"]["name"] for o in cluster if o["kind"] == "Node"])
os.makedirs("/tmp/realdra", exist_ok=True)
args = (["--shadow", "--disagreements", "/tmp/realdra/disagreements.jsonl"] if mode == "shadow"
        else ["--scheduler-name", "gantry"])
gantry = subprocess.Popen([gantry_bin, "run", "--kubeconfig", f"{R}/kubeconfig", "--emulated-version", "1.36",
                           "--metrics-addr", "127.0.0.1:19251"] + gates + args,
                          stderr=open(f"/tmp/realdra/gantry-{mode}.log", "w"))
time.sleep(3)
for p in steps:
    name = p["metadata"]["name"]
    claims = p["spec"].get("resourceClaims", [])
    for rc in [] if controller else claims:
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": f"{name}-{rc['name']}", "namespace": "default"},
                 "spec": templates[rc.pop("resourceClaimTemplateName")]}
        req("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim)
        rc["resourceClaimName"] = f"{name}-{rc['name']}"
    if mode != "shadow":
        p["spec"]["schedulerName"] = "gantry"
    req("POST", "/api/v1/namespaces/default/pods", p)
    time.sleep(2)
time.sleep(4)


def devices(claim):
    alloc = (claim or {}).get("status", {}).get("allocation")
    return [{"request": r["request"], "pool": r["pool"], "device": r["device"]}
            for r in alloc["devices"]["results"]] if alloc else None


problems = 0
expected = {e["pod"]: e for e in map(json.loads, open(f"{scen}/expected.jsonl"))}
extended = {}
if os.path.exists(f"{scen}/claims.jsonl"):
    for e in map(json.loads, open(f"{scen}/claims.jsonl")):
        if "extendedResourcesOf" in e:
            extended[e["extendedResourcesOf"]] = e
# The scheduler's FailedScheduling events per pod (both APIs: kube-scheduler writes
# events.k8s.io/v1, which core/v1 lists too), printed beside each outcome, not compared.
failed = {}
for e in req("GET", "/api/v1/namespaces/default/events")["items"]:
    if e.get("reason") == "FailedScheduling":
        pod = e["involvedObject"]["name"]
        failed[pod] = failed.get(pod, 0) + max(e.get("count") or 1, 1)
for p in steps:
    name, key = p["metadata"]["name"], f"default/{p['metadata']['name']}"
    got = req("GET", f"/api/v1/namespaces/default/pods/{name}")
    reason = next((c.get("message") for c in got["status"].get("conditions", [])
                   if c["type"] == "PodScheduled" and c["status"] == "False"), None)
    out = {"pod": key, "node": got["spec"].get("nodeName"), "reason": reason}
    want = expected.get(key, {})
    same = out["node"] == want.get("node") and out["reason"] == want.get("reason")
    made = {s["name"]: s.get("resourceClaimName") for s in got["status"].get("resourceClaimStatuses", [])}
    for rc in p["spec"].get("resourceClaims", []):
        name_of_claim = rc.get("resourceClaimName") or made.get(rc["name"])
        claim = name_of_claim and req(
            "GET", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name_of_claim}")
        out.setdefault("claims", {})[rc["name"]] = devices(claim)
    status = got["status"].get("extendedResourceClaimStatus")
    if status:
        claim = req("GET", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{status['resourceClaimName']}")
        out["extended"] = {
            "mappings": sorted((m["containerName"], m["resourceName"], m["requestName"])
                               for m in status["requestMappings"]),
            "devices": devices(claim),
        }
    if key in extended:
        want_ext = extended[key]
        mappings = sorted((m["container"], m["resource"], m["request"]) for m in want_ext["mappings"])
        want_devices = [{k: d[k] for k in ("request", "pool", "device")} for d in want_ext["devices"]]
        got_ext = out.get("extended", {})
        same = same and got_ext.get("mappings") == mappings and got_ext.get("devices") == want_devices
    problems += not same
    out["failedScheduling"] = failed.get(name, 0)
    print(("same " if same else "DIFFERS ") + json.dumps(out))
    if not same:
        print("  recorded " + json.dumps(want) + (" " + json.dumps(extended.get(key)) if key in extended else ""))
metrics = urllib.request.urlopen("http://127.0.0.1:19251/metrics").read().decode()
print("\n".join(l for l in metrics.splitlines() if l.startswith("gantry_shadow")))
gantry.send_signal(signal.SIGTERM)
gantry.wait(timeout=30)
print(f"{problems} of {len(steps)} pods differ from the recording")
sys.exit(1 if problems else 0)
