#!/usr/bin/env python3
"""Replays a scenario of this directory against a real kube-apiserver v1.36 serving the
Workload API with WorkloadAwarePreemption on (no kubelet, no controller-manager), placed by
`gantry run` or by a real kube-scheduler, and compares the outcome with the recording.

    python3 realapi.py <scenario-dir> run <gantry>            # gantry run places (schedulerName gantry)
    python3 realapi.py <scenario-dir> kube <kube-scheduler>   # kube-scheduler v1.36 places

The API server must run with `--feature-gates GenericWorkload=true,GangScheduling=true,
WorkloadAwarePreemption=true --runtime-config scheduling.k8s.io/v1alpha2=true`, at
https://127.0.0.1:6443, its files in $REALAPI (default /work/realapi): `admin.token` (a
token of system:masters, for this script and the kube-scheduler), `pki/ca.crt`,
`kubeconfig-admin`, and `kubeconfig` (the gantry-system/gantry-scheduler service account
that deploy/gantry.yaml, applied here as shipped, allows). Objects are created as the
recorder created them, 2 s apart; every pod's node, or its PodScheduled=False message, or
its deletion, and every PodGroup's condition are compared with `expected.jsonl` (a group's members as a multiset)."""
import json, os, signal, subprocess, sys, time
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from realapi_client import RBAC_PATHS, R, apply_deploy, make_ready, req, untaint, create as create_at  # noqa: E402

# The schedulers' gates; $GATES for another corpus (../gang-wap-tas-1.36 adds
# TopologyAwareWorkloadScheduling=true, which the API server must have on too).
GATES = os.environ.get("GATES", "GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true")
PATHS = {
    "Node": "/api/v1/nodes",
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "PodGroup": "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups",
    **RBAC_PATHS,
}


def create(o, exists_ok=False):
    return create_at(PATHS, o, exists_ok)


scen, mode, binary = sys.argv[1], sys.argv[2], sys.argv[3]
apply_deploy(PATHS)
cluster = yaml.safe_load(open(f"{scen}/cluster.yaml"))["items"]
steps = yaml.safe_load(open(f"{scen}/steps.yaml"))["items"]
for o in cluster:
    if o["kind"] == "Node":
        make_ready(o)
    create(o, exists_ok=o["kind"] == "PriorityClass")
untaint([o["metadata"]["name"] for o in cluster if o["kind"] == "Node"])
os.makedirs("/tmp/realgang", exist_ok=True)
log = open(f"/tmp/realgang/{mode}.log", "w")
if mode == "run":
    scheduler = subprocess.Popen([binary, "run", "--kubeconfig", f"{R}/kubeconfig", "--emulated-version", "1.36",
                                  "--feature-gates", GATES, "--scheduler-name", "gantry",
                                  "--metrics-addr", "127.0.0.1:19252"], stderr=log)
else:
    scheduler = subprocess.Popen([binary, "--kubeconfig", f"{R}/kubeconfig-admin", "--leader-elect=false",
                                  "--secure-port", "10259", "--bind-address", "127.0.0.1",
                                  "--feature-gates", GATES], stderr=log)
time.sleep(5)
for o in steps:
    if o["kind"] == "Pod" and mode == "run":
        o["spec"]["schedulerName"] = "gantry"
    create(o)
    time.sleep(2)
time.sleep(6)

# Upstream tries a group's never-tried members in Go map order, so which identical member
# lands where can differ between runs: members are compared per group, as a multiset.
group_of = {f"default/{o['metadata']['name']}": o["spec"]["schedulingGroup"]["podGroupName"]
            for o in steps if o["kind"] == "Pod" and o["spec"].get("schedulingGroup")}
members = {}
problems = 0
for line in open(f"{scen}/expected.jsonl"):
    want = json.loads(line)
    if "pod" in want:
        name = want["pod"].split("/")[1]
        got = req("GET", f"/api/v1/namespaces/default/pods/{name}", missing_ok=True)
        if got is None or got["metadata"].get("deletionTimestamp"):
            out = {"pod": want["pod"], "node": None, "reason": "deleted"}
        else:
            reason = next((c.get("message") for c in got["status"].get("conditions", [])
                           if c["type"] == "PodScheduled" and c["status"] == "False"), None)
            out = {"pod": want["pod"], "node": got["spec"].get("nodeName"), "reason": reason}
        same = out == want
        group = group_of.get(want["pod"])
        if group:
            wanted, found = members.setdefault(group, ([], []))
            wanted.append((want["node"], want["reason"]))
            found.append((out["node"], out["reason"]))
            print("member " + json.dumps(out))
            continue
    else:
        name = want["podGroup"].split("/")[1]
        got = req("GET", f"/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/{name}")
        conditions = [{k: c[k] for k in ("type", "status", "reason", "message")}
                      for c in got.get("status", {}).get("conditions", [])]
        out = {"podGroup": want["podGroup"], "conditions": conditions}
        same = out == want
    problems += not same
    print(("same " if same else "DIFFERS ") + json.dumps(out))
    if not same:
        print("  recorded " + json.dumps(want))
for group, (wanted, found) in sorted(members.items()):
    same = sorted(wanted, key=str) == sorted(found, key=str)
    problems += not same
    print(("same" if same else "DIFFERS") + f" members of {group}: {sorted(found, key=str)}")
    if not same:
        print(f"  recorded {sorted(wanted, key=str)}")
preempted = [e for e in req("GET", "/apis/events.k8s.io/v1/namespaces/default/events")["items"]
             if e.get("reason") == "Preempted"]
for e in preempted:
    print(f"event Preempted {e['regarding']['name']}: {e.get('note')} (related {e.get('related', {}).get('kind')})")
scheduler.send_signal(signal.SIGTERM)
scheduler.wait(timeout=30)
print(f"{problems} differ from the recording")
sys.exit(1 if problems else 0)
