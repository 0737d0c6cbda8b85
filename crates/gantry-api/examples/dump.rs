//! A production-sized cluster dump, and how long it takes to load.
//!
//! ```sh
//! cargo run --release -p gantry-api --example dump -- generate 100000 > dump.yaml
//! cargo run --release -p gantry-api --example dump -- generate 100000 --json > dump.json
//! cargo run --release -p gantry-api --example dump -- load dump.yaml
//! ```
//!
//! `generate` prints what `kubectl get nodes,pods -A -o yaml` prints for a cluster of
//! `pods / 50` nodes: pods of Deployments with several containers, labels, node and pod
//! affinity, tolerations, spread constraints, projected volumes, full status and
//! managedFields; one in twenty is a finished Job pod. `load` decodes a file as
//! `gantry simulate --cluster` does and prints one JSON line: objects, bytes, seconds,
//! peak resident memory.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::time::Instant;

use gantry_api::decode::{ClusterObjects, InputLimits};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["generate", pods, rest @ ..] => {
            let pods: usize = pods.parse().expect("a number of pods");
            generate(pods, rest.contains(&"--json"));
        }
        ["load", file] => load(file),
        _ => {
            eprintln!("usage: dump generate <pods> [--json] | dump load <file>");
            std::process::exit(2);
        }
    }
}

fn load(file: &str) {
    let start = Instant::now();
    let bytes = std::fs::metadata(file).expect("the file exists").len();
    let reader = std::fs::File::open(file).expect("the file opens");
    let mut objects = ClusterObjects::default();
    objects
        .read(reader, file, &InputLimits::default())
        .unwrap_or_else(|e| panic!("{e}"));
    objects.admit().unwrap_or_else(|e| panic!("{e}"));
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{{\"file\":{file:?},\"bytes\":{bytes},\"nodes\":{},\"pods\":{},\"finished_pods\":{},\"seconds\":{seconds:.2},\"cpu_seconds\":{:.2},\"mib_per_s\":{:.0},\"peak_rss_mib\":{}}}",
        objects.nodes.len(),
        objects.pods.len(),
        objects.finished_pods.len(),
        cpu_seconds(),
        bytes as f64 / seconds / (1 << 20) as f64,
        peak_rss_mib()
    );
}

/// User and system time of this process (all threads), from `/proc/self/stat`: on a busy
/// machine it says more than the wall clock.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}

/// `VmHWM` from `/proc/self/status`, in MiB.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

const ZONES: [&str; 3] = ["eu-west-1a", "eu-west-1b", "eu-west-1c"];
const APPS: [&str; 8] = [
    "checkout",
    "cart",
    "search",
    "catalog",
    "payments",
    "auth",
    "frontend",
    "recommender",
];

fn generate(pods: usize, json: bool) {
    let nodes = pods.div_ceil(50).max(1);
    let out = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, out.lock());
    if json {
        write!(out, "{{\"apiVersion\":\"v1\",\"items\":[").unwrap();
    } else {
        writeln!(out, "apiVersion: v1\nitems:").unwrap();
    }
    let mut first = true;
    let mut emit = |out: &mut BufWriter<_>, yaml: String| {
        if json {
            let value: serde_json::Value = serde_saphyr::from_str(&yaml).expect("valid YAML");
            if !first {
                out.write_all(b",").unwrap();
            }
            serde_json::to_writer(&mut *out, &value).unwrap();
        } else {
            for (i, line) in yaml.lines().enumerate() {
                let prefix = if i == 0 { "- " } else { "  " };
                writeln!(out, "{prefix}{line}").unwrap();
            }
        }
        first = false;
    };
    for n in 0..nodes {
        emit(&mut out, node(n));
    }
    for p in 0..pods {
        emit(&mut out, pod(p, nodes));
    }
    if json {
        writeln!(
            out,
            "],\"kind\":\"List\",\"metadata\":{{\"resourceVersion\":\"\"}}}}"
        )
        .unwrap();
    } else {
        writeln!(out, "kind: List\nmetadata:\n  resourceVersion: \"\"").unwrap();
    }
    out.flush().unwrap();
}

fn node(n: usize) -> String {
    let zone = ZONES[n % ZONES.len()];
    format!(
        r#"apiVersion: v1
kind: Node
metadata:
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    volumes.kubernetes.io/controller-managed-attach-detach: "true"
  creationTimestamp: "2024-04-01T10:00:00Z"
  labels:
    beta.kubernetes.io/arch: amd64
    beta.kubernetes.io/instance-type: m6i.4xlarge
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: node-{n}
    kubernetes.io/os: linux
    node.kubernetes.io/instance-type: m6i.4xlarge
    topology.kubernetes.io/region: eu-west-1
    topology.kubernetes.io/zone: {zone}
  name: node-{n}
  resourceVersion: "{rv}"
  uid: 6e3a8f2c-0000-4000-8000-{n:012}
spec:
  podCIDR: 10.{a}.{b}.0/24
  providerID: aws:///{zone}/i-{n:017x}
status:
  addresses:
  - address: 10.1.{a}.{b}
    type: InternalIP
  - address: node-{n}
    type: Hostname
  allocatable:
    cpu: 15890m
    ephemeral-storage: "95551679124"
    hugepages-1Gi: "0"
    hugepages-2Mi: "0"
    memory: 62919308Ki
    pods: "110"
  capacity:
    cpu: "16"
    ephemeral-storage: 104845292Ki
    hugepages-1Gi: "0"
    hugepages-2Mi: "0"
    memory: 64069708Ki
    pods: "110"
  conditions:
  - lastHeartbeatTime: "2024-05-03T08:00:00Z"
    lastTransitionTime: "2024-04-01T10:01:00Z"
    message: kubelet is posting ready status
    reason: KubeletReady
    status: "True"
    type: Ready
  images:
  - names:
    - registry.example.com/shop/checkout@sha256:4b1f6a3c9e0d2f7a8b5c6d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a
    - registry.example.com/shop/checkout:1.42.0
    sizeBytes: 187234567
  nodeInfo:
    architecture: amd64
    containerRuntimeVersion: containerd://1.7.11
    kernelVersion: 6.1.79
    kubeProxyVersion: v1.28.5
    kubeletVersion: v1.28.5
    operatingSystem: linux
    osImage: Amazon Linux 2023
"#,
        rv = 1000 + n,
        a = n / 250,
        b = n % 250,
    )
}

fn pod(p: usize, nodes: usize) -> String {
    let app = APPS[p % APPS.len()];
    let hash = format!("{:x}", 0x5f7d9c6b4u64 + (p % 97) as u64);
    let finished = p % 20 == 19;
    let node = (p * 7919) % nodes;
    let name = if finished {
        format!("{app}-report-{p}-x{:04}", p % 9973)
    } else {
        format!("{app}-{hash}-{:05x}", p)
    };
    let mut env = String::new();
    for (k, v) in [
        ("LOG_LEVEL", "info"),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://otel-collector.observability:4317",
        ),
        ("CACHE_URL", "redis://cache.shop:6379"),
    ] {
        let _ = write!(env, "\n    - name: {k}\n      value: {v}");
    }
    let (owner_kind, owner_name, phase, state) = if finished {
        (
            "Job",
            format!("{app}-report-{p}"),
            "Succeeded",
            "terminated:\n        containerID: containerd://0f9e8d7c6b5a\n        exitCode: 0\n        finishedAt: \"2024-05-03T08:05:00Z\"\n        reason: Completed\n        startedAt: \"2024-05-03T08:00:05Z\"",
        )
    } else {
        (
            "ReplicaSet",
            format!("{app}-{hash}"),
            "Running",
            "running:\n        startedAt: \"2024-05-03T08:00:05Z\"",
        )
    };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubectl.kubernetes.io/restartedAt: "2024-05-02T21:13:44Z"
    prometheus.io/port: "9090"
    prometheus.io/scrape: "true"
  creationTimestamp: "2024-05-03T08:00:00Z"
  generateName: {app}-{hash}-
  labels:
    app: {app}
    app.kubernetes.io/name: {app}
    app.kubernetes.io/part-of: shop
    pod-template-hash: {hash}
    tier: backend
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {{}}
          f:kubectl.kubernetes.io/restartedAt: {{}}
        f:generateName: {{}}
        f:labels:
          .: {{}}
          f:app: {{}}
          f:pod-template-hash: {{}}
        f:ownerReferences:
          .: {{}}
          k:{{"uid":"9d3c1e2a-1111-2222-3333-444455556666"}}: {{}}
      f:spec:
        f:affinity:
          .: {{}}
          f:podAntiAffinity:
            .: {{}}
            f:preferredDuringSchedulingIgnoredDuringExecution: {{}}
        f:containers:
          k:{{"name":"{app}"}}:
            .: {{}}
            f:env:
              .: {{}}
              k:{{"name":"LOG_LEVEL"}}:
                .: {{}}
                f:name: {{}}
                f:value: {{}}
            f:image: {{}}
            f:imagePullPolicy: {{}}
            f:name: {{}}
            f:ports:
              .: {{}}
              k:{{"containerPort":8080,"protocol":"TCP"}}:
                .: {{}}
                f:containerPort: {{}}
                f:name: {{}}
                f:protocol: {{}}
            f:resources:
              .: {{}}
              f:limits:
                .: {{}}
                f:memory: {{}}
              f:requests:
                .: {{}}
                f:cpu: {{}}
                f:memory: {{}}
        f:tolerations: {{}}
        f:topologySpreadConstraints: {{}}
    manager: kube-controller-manager
    operation: Update
    time: "2024-05-03T08:00:00Z"
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:status:
        f:conditions:
          k:{{"type":"ContainersReady"}}:
            .: {{}}
            f:lastProbeTime: {{}}
            f:lastTransitionTime: {{}}
            f:status: {{}}
            f:type: {{}}
          k:{{"type":"Ready"}}:
            .: {{}}
            f:lastProbeTime: {{}}
            f:lastTransitionTime: {{}}
            f:status: {{}}
            f:type: {{}}
        f:containerStatuses: {{}}
        f:hostIP: {{}}
        f:phase: {{}}
        f:podIP: {{}}
        f:startTime: {{}}
    manager: kubelet
    operation: Update
    subresource: status
    time: "2024-05-03T08:00:06Z"
  name: {name}
  namespace: shop-{ns}
  ownerReferences:
  - apiVersion: apps/v1
    blockOwnerDeletion: true
    controller: true
    kind: {owner_kind}
    name: {owner_name}
    uid: 9d3c1e2a-1111-2222-3333-444455556666
  resourceVersion: "{rv}"
  uid: 7a1e7c55-0000-4000-8000-{p:012}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: kubernetes.io/os
            operator: In
            values:
            - linux
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - podAffinityTerm:
          labelSelector:
            matchLabels:
              app: {app}
          topologyKey: kubernetes.io/hostname
        weight: 100
  containers:
  - env:{env}
    image: registry.example.com/shop/{app}:1.42.0
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 3
      httpGet:
        path: /healthz
        port: 8080
        scheme: HTTP
      periodSeconds: 10
      successThreshold: 1
      timeoutSeconds: 1
    name: {app}
    ports:
    - containerPort: 8080
      name: http
      protocol: TCP
    - containerPort: 9090
      name: metrics
      protocol: TCP
    readinessProbe:
      failureThreshold: 3
      httpGet:
        path: /ready
        port: 8080
        scheme: HTTP
      periodSeconds: 5
      successThreshold: 1
      timeoutSeconds: 1
    resources:
      limits:
        memory: 512Mi
      requests:
        cpu: 100m
        memory: 256Mi
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    volumeMounts:
    - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      name: kube-api-access-{p:05x}
      readOnly: true
  - args:
    - proxy
    - sidecar
    image: registry.example.com/mesh/proxy:1.21.2
    imagePullPolicy: IfNotPresent
    name: mesh-proxy
    ports:
    - containerPort: 15090
      name: http-envoy-prom
      protocol: TCP
    resources:
      limits:
        cpu: "2"
        memory: 1Gi
      requests:
        cpu: 50m
        memory: 64Mi
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      runAsNonRoot: true
      runAsUser: 1337
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  - image: registry.example.com/obs/log-shipper:3.1.0
    imagePullPolicy: IfNotPresent
    name: log-shipper
    resources:
      requests:
        cpu: 10m
        memory: 32Mi
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  nodeName: node-{node}
  preemptionPolicy: PreemptLowerPriority
  priority: 0
  restartPolicy: {restart}
  schedulerName: default-scheduler
  securityContext:
    fsGroup: 1000
  serviceAccount: {app}
  serviceAccountName: {app}
  terminationGracePeriodSeconds: 30
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  - effect: NoExecute
    key: node.kubernetes.io/unreachable
    operator: Exists
    tolerationSeconds: 300
  topologySpreadConstraints:
  - labelSelector:
      matchLabels:
        app: {app}
    matchLabelKeys:
    - pod-template-hash
    maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
  volumes:
  - name: kube-api-access-{p:05x}
    projected:
      defaultMode: 420
      sources:
      - serviceAccountToken:
          expirationSeconds: 3607
          path: token
      - configMap:
          items:
          - key: ca.crt
            path: ca.crt
          name: kube-root-ca.crt
      - downwardAPI:
          items:
          - fieldRef:
              apiVersion: v1
              fieldPath: metadata.namespace
            path: namespace
status:
  conditions:
  - lastProbeTime: null
    lastTransitionTime: "2024-05-03T08:00:00Z"
    status: "True"
    type: Initialized
  - lastProbeTime: null
    lastTransitionTime: "2024-05-03T08:00:06Z"
    status: "True"
    type: Ready
  - lastProbeTime: null
    lastTransitionTime: "2024-05-03T08:00:00Z"
    status: "True"
    type: PodScheduled
  containerStatuses:
  - containerID: containerd://3c5e7a9b1d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c
    image: registry.example.com/shop/{app}:1.42.0
    imageID: registry.example.com/shop/{app}@sha256:4b1f6a3c9e0d2f7a8b5c6d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a
    lastState: {{}}
    name: {app}
    ready: true
    restartCount: 0
    started: true
    state:
      {state}
  hostIP: 10.1.{a}.{b}
  phase: {phase}
  podIP: 100.64.{pa}.{pb}
  podIPs:
  - ip: 100.64.{pa}.{pb}
  qosClass: Burstable
  startTime: "2024-05-03T08:00:00Z"
"#,
        ns = p % 40,
        rv = 200_000 + p,
        restart = if finished { "Never" } else { "Always" },
        a = node / 250,
        b = node % 250,
        pa = (p / 250) % 250,
        pb = p % 250,
    )
}
