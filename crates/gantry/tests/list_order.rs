//! A kube-scheduler starting against a cluster fills its cache and queue from its
//! informers' first lists, which kube-apiserver returns sorted by key: nodes by name, pods
//! by namespace then name. The order objects stand in a file must not change a decision.

mod common;

use common::{gantry, stderr, write};

/// A node of 4 CPUs and 8 GiB in `zone`, reporting `images` as (name, bytes).
fn node(name: &str, zone: &str, images: &[(&str, u64)]) -> String {
    let images: Vec<String> = images
        .iter()
        .map(|(image, bytes)| format!("{{names: [\"{image}\"], sizeBytes: {bytes}}}"))
        .collect();
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}}}}}\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}\n  images: [{}]\n---\n",
        images.join(", ")
    )
}

/// A pod asking for `cpu` and `memory`, bound to `node` if one is given.
fn pod(namespace: &str, name: &str, node: Option<&str>, cpu: &str, memory: &str) -> String {
    let node = node.map_or(String::new(), |n| format!("nodeName: {n}, "));
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{namespace: {namespace}, name: {name}}}\nspec: {{{node}priority: 0, containers: [{{name: c, image: registry.example/app:latest, resources: {{requests: {{cpu: '{cpu}', memory: {memory}}}}}}}]}}\n---\n"
    )
}

fn placements(dump: &str, seed: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "cluster.yaml", dump);
    let out_file = dir.path().join("placements.jsonl");
    let out = gantry(&[
        "simulate",
        "--cluster",
        &cluster,
        "--seed",
        seed,
        "--placements",
        out_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read(out_file).unwrap()
}

/// Thirty equal nodes in three zones and forty equal pending pods: every pod has ties
/// to break, so the order of the node list (which node the seeded draw lands on) and of
/// the queue show in the placements. A dump in key order and the same objects shuffled
/// must give the same bytes.
#[test]
fn a_shuffled_dump_decides_as_the_sorted_one() {
    let mut objects: Vec<String> = Vec::new();
    for i in 0..30 {
        let zone = ["zone-a", "zone-b", "zone-c"][i % 3];
        objects.push(node(&format!("node-{i:02}"), zone, &[]));
    }
    for i in 0..10 {
        let node = format!("node-{:02}", i * 3);
        objects.push(pod(
            "default",
            &format!("running-{i}"),
            Some(&node),
            "1",
            "1Gi",
        ));
    }
    for i in 0..40 {
        let namespace = ["team-a", "team-b"][i % 2];
        objects.push(pod(namespace, &format!("p-{i:02}"), None, "500m", "512Mi"));
    }
    let sorted = objects.concat();
    // A fixed shuffle (a multiplicative walk over the indices), so the test is the same
    // in every run.
    let shuffled: String = (0..objects.len())
        .map(|i| objects[(i * 37 + 11) % objects.len()].as_str())
        .collect();
    assert_ne!(sorted, shuffled);
    for seed in ["1", "7"] {
        let expected = placements(&sorted, seed);
        assert!(!expected.is_empty());
        assert!(
            placements(&shuffled, seed) == expected,
            "seed {seed}: the shuffled dump placed pods differently"
        );
    }
}

/// ImageLocality takes an image's size from the first node added that reports it
/// (`addNodeImageStates` in `backend/cache/cache.go`: the `ImageStateSummary` is made
/// once, with that node's `SizeBytes`). Nodes `a` and `b` report the same mutable tag
/// with different sizes; `b` comes first in the file, `a` first by name.
///
/// As kube-scheduler adds them (`a` first): the image counts 30 MB, spread over 2 of 3
/// nodes is 20 MB, under ImageLocality's 23 MB floor, so 0 on every node; NodeResourcesFit
/// (LeastAllocated) gives `c` (empty) 75 and `a`/`b` (1 CPU, 2 GiB of 4 and 8 used) 50,
/// and the balance is perfect everywhere: `c` wins. In file order (`b` first) the image
/// would count 800 MB: 533 MB spread, `100 * (533 - 23) / (1000 - 23)` = 52, and `a` or
/// `b` (50 + 52) would beat `c` (75).
#[test]
fn an_images_size_is_the_first_listed_nodes() {
    let image = "registry.example/app:latest";
    let dump = [
        node("b", "zone-a", &[(image, 800_000_000)]),
        node("a", "zone-a", &[(image, 30_000_000)]),
        node("c", "zone-a", &[]),
        pod("default", "on-b", Some("b"), "1", "2Gi"),
        pod("default", "on-a", Some("a"), "1", "2Gi"),
        pod("default", "new", None, "1", "2Gi"),
    ]
    .concat();
    for seed in ["1", "2", "3"] {
        let placed = String::from_utf8(placements(&dump, seed)).unwrap();
        let line: serde_json::Value = serde_json::from_str(placed.trim()).unwrap();
        assert_eq!(line["pod"], "default/new");
        assert_eq!(line["node"], "c", "seed {seed}");
    }
}
