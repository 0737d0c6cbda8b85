//! A trace as Kubernetes objects for `gantry simulate` and `gantry explain`: nodes whose
//! cards HAMi registered (`hami.io/node-nvidia-register`; each card 1000 MiB, standing for
//! the trace's 1000 milli-GPU, shared by up to 1000 pods, `NVIDIA-<model>` as its type, since HAMi shares only cards whose type names NVIDIA) and the
//! tasks as pending pods (`nvidia.com/gpu`, `nvidia.com/gpumem` = milli for a share of
//! one card, `nvidia.com/use-gputype` for `gpu_spec`), in a sweep's arrival order.

use std::fmt::Write;

use crate::trace::{TraceNode, TracePod};

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn node(out: &mut String, n: &TraceNode) {
    let cards: Vec<String> = (0..n.gpus)
        .map(|i| {
            format!(
                "{{\"id\":\"{}-gpu{i}\",\"index\":{i},\"count\":1000,\"devmem\":1000,\"devcore\":100,\"type\":{},\"numa\":0,\"mode\":\"hami-core\",\"health\":true}}",
                n.name,
                serde_json_string(&n.model)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: {}",
        quote(&n.name)
    );
    let _ = writeln!(
        out,
        "    labels: {{kubernetes.io/hostname: {}}}",
        quote(&n.name)
    );
    if n.gpus > 0 {
        let _ = writeln!(
            out,
            "    annotations:\n      hami.io/node-nvidia-register: {}",
            quote(&format!("[{}]", cards.join(",")))
        );
    }
    let _ = writeln!(
        out,
        "  status:\n    allocatable: {{cpu: {}m, memory: {}Mi, pods: \"1001\", nvidia.com/gpu: \"{}\"}}\n    conditions: [{{type: Ready, status: \"True\"}}]",
        n.cpu_milli,
        n.memory_mib,
        n.gpus * 1000
    );
}

/// A model name as a JSON string (names are kept to letters, digits, `-_.`).
fn serde_json_string(s: &str) -> String {
    let mut out = String::from("\"NVIDIA-");
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || "-_.".contains(c) {
            out.push(c);
        }
    }
    out.push('"');
    out
}

fn pod(out: &mut String, p: &TracePod, name: &str) {
    let _ = writeln!(
        out,
        "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: {}\n    namespace: openb",
        quote(name)
    );
    if !p.gpu_spec.is_empty() && p.num_gpu > 0 {
        let _ = writeln!(
            out,
            "    annotations: {{nvidia.com/use-gputype: {}}}",
            quote(&p.gpu_spec.replace('|', ","))
        );
    }
    let mut limits = String::new();
    if p.num_gpu > 0 && p.gpu_milli > 0 {
        limits = format!("nvidia.com/gpu: \"{}\"", p.num_gpu);
        if p.num_gpu == 1 && p.gpu_milli < 1000 {
            let _ = write!(limits, ", nvidia.com/gpumem: \"{}\"", p.gpu_milli);
        }
    }
    let _ = writeln!(
        out,
        "  spec:\n    containers:\n    - name: main\n      image: task\n      resources:\n        requests: {{cpu: {}m, memory: {}Mi}}",
        p.cpu_milli, p.memory_mib
    );
    if !limits.is_empty() {
        let _ = writeln!(out, "        limits: {{{limits}}}");
    }
}

/// The YAML `List`: every node, then the pods in `order` (indices into `pods`); a pod
/// that arrives again (a tuning copy) is named `<name>-tuned-<i>` as the simulator names it.
pub fn yaml(nodes: &[TraceNode], pods: &[TracePod], order: &[u32]) -> String {
    let mut out = String::from(
        "# Written by gantry sweep --manifests from an openb trace.\napiVersion: v1\nkind: List\nitems:\n",
    );
    for n in nodes {
        node(&mut out, n);
    }
    let mut seen = vec![false; pods.len()];
    let mut tuned = 0;
    for &i in order {
        let p = &pods[i as usize];
        let name = if std::mem::replace(&mut seen[i as usize], true) {
            tuned += 1;
            format!("{}-tuned-{}", p.name, tuned - 1)
        } else {
            p.name.clone()
        };
        pod(&mut out, p, &name);
    }
    out
}
