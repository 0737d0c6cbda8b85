"""A churning workload on a real control plane, placed by a real kube-scheduler, with
`gantry record` recording it and `gantry run --shadow` shadowing the scheduler; then the
recording replayed by `gantry simulate --trace --follow-recorded`. docs/record.md's
"Measured against a real cluster" comes from this script.

    python3 churn_realapi.py GANTRY OUTDIR [--minutes 10] [--parallelism N] [--seed 1]

Needs a fresh control plane (etcd and kube-apiserver, no scheduler, no nodes) as
`realapi_client.py` describes, the real `kube-scheduler` binary in $REALAPI/bin, and
$REALAPI/kubeconfig-admin and $REALAPI/kubeconfig-gantry (the latter a token of
system:serviceaccount:gantry-system:gantry-scheduler, which this script binds to
deploy/gantry-readonly.yaml's role: record and shadow only list and watch).

The cluster: 40 nodes of 6 shapes in 3 zones (nodes of one shape in one zone are alike);
for --minutes, 2 pods a second of 5 apps (requests from 100m to 3 cpu, 128Mi to 8Gi;
some with a zone spread, a preferred anti-affinity or a zone selector), the oldest deleted
to keep about 250. The same --seed gives the same nodes and pods in the same order.
--parallelism sets the real scheduler's `parallelism` (its Filter workers; default 16)."""
import argparse, os, random, signal, subprocess, sys, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from realapi_client import R, req, create, RBAC_PATHS, make_ready, untaint  # noqa: E402

SHAPES = [(4, 16), (8, 32), (8, 64), (16, 64), (16, 128), (32, 128)]  # cpu, GiB
ZONES = ["zone-a", "zone-b", "zone-c"]
NODES = 40
KEEP = 250
RATE = 2.0  # pods a second
PATHS = dict(RBAC_PATHS, Node="/api/v1/nodes", Pod="/api/v1/namespaces/{ns}/pods")


def nodes():
    out = []
    for i in range(NODES):
        cpu, mem = SHAPES[i % len(SHAPES)]
        zone = ZONES[(i // len(SHAPES)) % len(ZONES)]
        name = f"node-{i:02d}"
        capacity = {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"}
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                    "topology.kubernetes.io/zone": zone}},
                "spec": {}, "status": {"capacity": capacity, "allocatable": capacity}}
        make_ready(node)
        out.append(node)
    return out


def pod(rng, n):
    """The n-th pod: one of 5 apps, its requests drawn from the app's range."""
    app = rng.choice(["web", "api", "batch", "cache", "worker"])
    cpu_range, mem_range = {"web": ((100, 500), (128, 512)), "api": ((250, 1000), (256, 2048)),
                            "batch": ((1000, 3000), (2048, 8192)), "cache": ((200, 800), (1024, 4096)),
                            "worker": ((500, 2000), (512, 4096))}[app]
    cpu, mem = rng.randrange(*cpu_range, 50), rng.randrange(*mem_range, 128)
    spec = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}],
            "terminationGracePeriodSeconds": 0}
    labels = {"app": app}
    if app == "web":
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": labels}}]
    elif app == "api":
        spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                              "labelSelector": {"matchLabels": labels}}}]}}
    elif app == "cache":
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{app}-{n:05d}", "namespace": "default", "labels": labels},
            "spec": spec}


def grant_readonly():
    """deploy/gantry-readonly.yaml's role, bound to the gantry token's account."""
    import yaml
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for doc in yaml.safe_load_all(open(f"{repo}/deploy/gantry-readonly.yaml")):
        if doc and doc["kind"] == "ClusterRole":
            create(PATHS, doc, exists_ok=True)
    create(PATHS, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "gantry-readonly"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "gantry-readonly"},
                   "subjects": [{"kind": "User",
                                 "name": "system:serviceaccount:gantry-system:gantry-scheduler"}]},
           exists_ok=True)


def metrics(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics") as r:
        return [l for l in r.read().decode().splitlines() if l.startswith("gantry_shadow")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("gantry")
    p.add_argument("out")
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--parallelism", type=int)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)

    grant_readonly()
    for node in nodes():
        create(PATHS, node)
    untaint(f"node-{i:02d}" for i in range(NODES))

    sched = [f"{R}/bin/kube-scheduler", "--kubeconfig", f"{R}/kubeconfig-admin",
             "--leader-elect=false", "--secure-port", "10259", "--bind-address", "127.0.0.1"]
    if a.parallelism:
        config = f"{a.out}/scheduler-config.yaml"
        with open(config, "w") as f:
            f.write("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    f"parallelism: {a.parallelism}\nleaderElection: {{leaderElect: false}}\n"
                    f"clientConnection: {{kubeconfig: {R}/kubeconfig-admin}}\n")
        sched = sched[:1] + ["--config", config, "--secure-port", "10259", "--bind-address", "127.0.0.1"]
    log = lambda name: open(f"{a.out}/{name}.log", "w")
    procs = [subprocess.Popen(sched, stdout=log("kube-scheduler"), stderr=subprocess.STDOUT)]
    gantry_kc = f"{R}/kubeconfig-gantry"
    record = subprocess.Popen([a.gantry, "record", "--output", f"{a.out}/trace.jsonl.gz",
                               "--kubeconfig", gantry_kc], stdout=log("record"), stderr=subprocess.STDOUT)
    shadow = subprocess.Popen([a.gantry, "run", "--shadow", "--kubeconfig", gantry_kc,
                               "--emulated-version", "1.36", "--metrics-addr", "127.0.0.1:9464",
                               "--disagreements", f"{a.out}/disagreements.jsonl"],
                              stdout=log("shadow"), stderr=subprocess.STDOUT)
    procs += [record, shadow]
    time.sleep(5)

    live, start, n = [], time.monotonic(), 0
    try:
        while time.monotonic() - start < a.minutes * 60:
            n += 1
            p = pod(rng, n)
            create(PATHS, p)
            live.append(p["metadata"]["name"])
            while len(live) > KEEP:
                victim = live.pop(rng.randrange(len(live) // 4 + 1))  # among the oldest quarter
                req("DELETE", f"/api/v1/namespaces/default/pods/{victim}?gracePeriodSeconds=0",
                    missing_ok=True)
            time.sleep(max(0.0, start + n / RATE - time.monotonic()))
        time.sleep(10)
        print(f"{n} pods created in {time.monotonic() - start:.0f} s")
        print("\n".join(metrics("127.0.0.1:9464")))
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
    replay = subprocess.run([a.gantry, "simulate", "--trace", f"{a.out}/trace.jsonl.gz",
                             "--follow-recorded", "--emulated-version", "1.36"],
                            capture_output=True, text=True)
    with open(f"{a.out}/replay.txt", "w") as f:
        f.write(replay.stdout + replay.stderr)
    print("\n".join(l for l in replay.stdout.splitlines() if "replay:" in l))


if __name__ == "__main__":
    main()
