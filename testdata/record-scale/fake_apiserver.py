#!/usr/bin/env python3
"""A minimal list/watch API server for measuring `gantry record` at scale.

    python3 fake_apiserver.py PORT NODES PODS CHANGES RATE   (NO_AFFINITY=1: plain pods)

Serves every kind `gantry record` lists: nodes and pods from memory (typed lists, paged by
`limit`/`continue`; watches resumed from a resourceVersion), the other kinds empty, DRA and
the Workload API not served. After the first pod watch and WARMUP seconds, a churn thread
makes CHANGES changes at RATE a second: 30% pods created (pending), 30% pending pods bound
to a random node (not a scheduler's choice: a replay reproduces ~0% by construction), 30%
pods deleted, 10% node status updates. Every pod carries an environment value
(`do-not-record-me`) that the trace must not hold. Used for docs/record.md's measurement.
"""
import json, sys, threading, time, random
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlparse, parse_qs

PORT = int(sys.argv[1])
NODES = int(sys.argv[2])
PODS = int(sys.argv[3])
CHANGES = int(sys.argv[4])
RATE = float(sys.argv[5])
WARMUP = 3.0
import os
NO_AFFINITY = os.environ.get("NO_AFFINITY") == "1"
rng = random.Random(7)

lock = threading.Condition()
rv = [1000]
log = []  # (rv, kind, type, object)
store = {"nodes": {}, "pods": {}}
done = threading.Event()


def next_rv():
    rv[0] += 1
    return rv[0]


def make_node(i):
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-node-{i}", "resourceVersion": str(next_rv()),
                     "creationTimestamp": "2026-12-01T00:00:00Z",
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64",
                                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                                "node.kubernetes.io/instance-type": f"m5.{['xlarge', '2xlarge', '4xlarge'][i % 3]}"}},
        "spec": {"providerID": f"aws:///zone/i-{i:012d}"},
        "status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "15890m", "memory": "62Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                            "lastHeartbeatTime": "2026-12-01T00:00:00Z",
                            "lastTransitionTime": "2026-12-01T00:00:00Z",
                            "reason": "KubeletReady" if t == "Ready" else "KubeletHasSufficient",
                            "message": "kubelet is posting ready status"}
                           for t in ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]],
            "images": [{"names": [f"registry.example.com/app-{j}@sha256:{j:064x}", f"registry.example.com/app-{j}:v{j}"],
                        "sizeBytes": 10_000_000 * (j + 1)} for j in range(10)],
            "nodeInfo": {"kubeletVersion": "v1.36.2", "osImage": "Linux", "architecture": "amd64"},
        },
    }


def make_pod(i, node=None):
    app = f"app-{i % 50}"
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{app}-{i:07d}", "namespace": f"ns-{i % 20}", "uid": f"uid-pod-{i}",
                     "resourceVersion": str(next_rv()), "creationTimestamp": "2026-12-01T00:00:00Z",
                     "labels": {"app": app, "pod-template-hash": "5d9c8b7f6"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-5d9c8b7f6",
                                          "uid": f"uid-rs-{i % 50}", "controller": True}]},
        "spec": {
            "schedulerName": "default-scheduler", "priority": 0,
            "containers": [{"name": "main", "image": f"registry.example.com/{app}:v1",
                            "env": [{"name": "SECRET_TOKEN", "value": "do-not-record-me"}],
                            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                                          "limits": {"cpu": "1", "memory": "1Gi"}}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}},
                                                    "topologyKey": "kubernetes.io/hostname"}}]}},
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }
    if NO_AFFINITY:
        del pod["spec"]["affinity"]
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
    return pod


def key(obj):
    m = obj["metadata"]
    return (m.get("namespace", ""), m["name"])


for i in range(NODES):
    n = make_node(i)
    store["nodes"][key(n)] = n
next_pod = 0
for i in range(PODS):
    p = make_pod(i, f"node-{rng.randrange(NODES):05d}")
    store["pods"][key(p)] = p
    next_pod += 1

EMPTY = {}
pod_watch_seen = threading.Event()


def record_change(kind, typ, obj):
    with lock:
        obj["metadata"]["resourceVersion"] = str(next_rv())
        if typ == "DELETED":
            store[kind].pop(key(obj), None)
        else:
            store[kind][key(obj)] = obj
        log.append((rv[0], kind, typ, json.dumps({"type": typ, "object": obj}).encode()))
        lock.notify_all()


def churn():
    global next_pod
    pod_watch_seen.wait()
    time.sleep(WARMUP)
    start = time.time()
    made = 0
    pending = []
    while made < CHANGES:
        r = rng.random()
        if r < 0.3 or not store["pods"]:
            p = make_pod(next_pod)
            next_pod += 1
            record_change("pods", "ADDED", p)
            pending.append(key(p))
        elif r < 0.6 and pending:
            k = pending.pop(0)
            p = json.loads(json.dumps(store["pods"][k]))
            p["spec"]["nodeName"] = f"node-{rng.randrange(NODES):05d}"
            p["status"]["phase"] = "Running"
            record_change("pods", "MODIFIED", p)
        elif r < 0.9:
            k = rng.choice(list(store["pods"].keys())) if len(store["pods"]) < 1000 else None
            if k is None:
                # Cheap random pick from a large dict.
                k = next(iter(store["pods"]))
            if k in pending:
                pending.remove(k)
            record_change("pods", "DELETED", store["pods"][k])
        else:
            k = (("", f"node-{rng.randrange(NODES):05d}"))
            n = json.loads(json.dumps(store["nodes"][k]))
            n["status"]["conditions"][3]["lastHeartbeatTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ")
            n["metadata"]["labels"]["churn"] = str(made)
            record_change("nodes", "MODIFIED", n)
        made += 1
        target = start + made / RATE
        delay = target - time.time()
        if delay > 0:
            time.sleep(delay)
    sys.stderr.write(f"churn: {made} changes in {time.time() - start:.1f} s; pods now {len(store['pods'])}\n")
    done.set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        path = url.path
        if path == "/version":
            return self.send_json(200, {"major": "1", "minor": "36", "gitVersion": "v1.36.2"})
        kind = None
        if path == "/api/v1/nodes":
            kind = "nodes"
        elif path == "/api/v1/pods":
            kind = "pods"
        if q.get("watch") in ("1", "true"):
            return self.watch(kind, int(q.get("resourceVersion") or 0), int(q.get("timeoutSeconds") or 300))
        if kind is None:
            if "deviceclasses" in path or "resourceslices" in path or "resourceclaims" in path \
                    or "devicetaintrules" in path or "podgroups" in path or "workloads" in path:
                return self.send_json(404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"})
            with lock:
                current = rv[0]
            return self.send_json(200, {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": str(current)}, "items": []})
        with lock:
            items = sorted(store[kind].items())
            current = rv[0]
        limit = int(q.get("limit") or 0) or len(items)
        offset = int(q.get("continue") or 0)
        page = [v for _, v in items[offset:offset + limit]]
        meta = {"resourceVersion": str(current)}
        if offset + limit < len(items):
            meta["continue"] = str(offset + limit)
        list_kind = {"nodes": "NodeList", "pods": "PodList"}[kind]
        return self.send_json(200, {"kind": list_kind, "apiVersion": "v1", "metadata": meta, "items": page})

    def watch(self, kind, since, timeout):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if kind == "pods":
            pod_watch_seen.set()
        deadline = time.time() + min(timeout, 60)
        # Index of the first change after `since`.
        with lock:
            i = 0
            lo, hi = 0, len(log)
            while lo < hi:
                mid = (lo + hi) // 2
                if log[mid][0] <= since:
                    lo = mid + 1
                else:
                    hi = mid
            i = lo
        try:
            while time.time() < deadline:
                with lock:
                    while i >= len(log) and time.time() < deadline:
                        lock.wait(1.0)
                    batch = log[i:]
                    i = len(log)
                out = b"".join(line + b"\n" for (_, k, _, line) in batch if k == kind)
                if out:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(out), out))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass


threading.Thread(target=churn, daemon=True).start()
server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
server.daemon_threads = True
sys.stderr.write(f"serving {NODES} nodes, {PODS} pods on {PORT}\n")
server.serve_forever()
