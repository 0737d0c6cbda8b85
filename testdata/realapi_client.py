"""What the realapi.py scripts of this directory share: the API server of a control plane
run by hand (https://127.0.0.1:6443, its files in $REALAPI, default /work/realapi:
`admin.token`, a token of system:masters, and `pki/ca.crt`), and the calls they make."""
import json, os, ssl, time, urllib.error, urllib.request
import yaml

R = os.environ.get("REALAPI", "/work/realapi")
API = "https://127.0.0.1:6443"
TOKEN = open(f"{R}/admin.token").read().strip()
CTX = ssl.create_default_context(cafile=f"{R}/pki/ca.crt")

# Where deploy/gantry.yaml's objects are created.
RBAC_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


def req(method, path, body=None, ctype="application/json", missing_ok=False):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(API + path, data=data, method=method,
                               headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": ctype})
    try:
        with urllib.request.urlopen(r, context=CTX) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        if missing_ok and e.code in (404, 409):
            return None
        raise SystemExit(f"{method} {path} -> {e.code}: {e.read().decode()[:800]}")


def create(paths, o, exists_ok=False):
    """Creates `o` at its kind's path in `paths` (`{ns}` its namespace, default "default")."""
    ns = o.get("metadata", {}).get("namespace", "default")
    return req("POST", paths[o["kind"]].format(ns=ns), o, missing_ok=exists_ok)


def apply_deploy(paths):
    """Creates what deploy/gantry.yaml holds (its namespace, account and roles), as shipped."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for doc in yaml.safe_load_all(open(f"{repo}/deploy/gantry.yaml")):
        if doc and doc["kind"] in paths:
            create(paths, doc, exists_ok=True)


def make_ready(node):
    """Gives a Node of a scenario the Ready condition a kubelet would report."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    node["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                     "message": "fake", "lastHeartbeatTime": now, "lastTransitionTime": now}]


def untaint(names):
    """The API server's admission taints a new node not ready; no kubelet clears it."""
    for n in names:
        if req("GET", f"/api/v1/nodes/{n}")["spec"].get("taints"):
            req("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}, ctype="application/merge-patch+json")
