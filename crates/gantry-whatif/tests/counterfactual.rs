//! Counterfactuals for a pending pod: each suggestion is the single change that makes
//! the pod fit a node (checked by running the filters again), preemption victims are the
//! fewest, and templates say how many new nodes would take the pod.

use std::sync::Arc;

use gantry_api::dra::DraObjects;
use gantry_api::{Node, Pod, ResourceName, Resources, Sym, Taint, TaintEffect};
use gantry_framework::ApiObjects;
use gantry_framework::plugins::default_profile;
use gantry_whatif::counterfactual::counterfactuals;
use gantry_whatif::estimator::NodeTemplate;
use gantry_whatif::{ClusterSnapshot, StoreKind};

fn node(name: &str, milli_cpu: i64) -> Node {
    let mut allocatable = Resources::new(milli_cpu, 8 << 30);
    allocatable.set(ResourceName::Pods, 110);
    Node::new(name, allocatable).with_labels([("kubernetes.io/hostname", name)])
}

fn bound(name: &str, node: &str, milli_cpu: i64, priority: i32) -> Arc<Pod> {
    let mut pod = Pod::new("default", name)
        .with_requests(milli_cpu, 1 << 20)
        .on_node(node);
    pod.priority = priority;
    Arc::new(pod)
}

#[test]
fn each_node_gets_the_one_change_that_lets_the_pod_in() {
    let mut tainted = node("tainted", 4000);
    tainted.taints.push(Taint {
        key: Sym::new("dedicated"),
        value: Sym::new("db"),
        effect: TaintEffect::NoSchedule,
    });
    let mut cordoned = node("cordoned", 4000);
    cordoned.unschedulable = true;
    let mut both = node("both", 500);
    both.taints = tainted.taints.clone();
    let nodes = [
        node("busy", 2000),
        tainted,
        cordoned,
        both,
        node("crowded", 2000),
    ];
    let pods = [
        bound("big", "busy", 1500, 100),
        bound("low-1", "crowded", 800, 0),
        bound("low-2", "crowded", 800, 0),
        bound("high", "crowded", 200, 50),
    ];
    let dra = DraObjects::default();
    let mut s = ClusterSnapshot::new(
        StoreKind::Delta,
        default_profile("default-scheduler"),
        ApiObjects::default(),
        &dra,
    );
    s.load(&nodes, &pods, &dra).unwrap();
    let mut pending = Pod::new("default", "pending").with_requests(1000, 1 << 20);
    pending.priority = 10;
    let pending = Arc::new(pending);

    let template = |cpu: i64| NodeTemplate {
        node: node(&format!("t{cpu}"), cpu),
        slices: Vec::new(),
    };
    let c = counterfactuals(&mut s, &pending, &[template(4000), template(500)]).unwrap();
    let change = |node: &str| {
        c.nodes
            .iter()
            .find(|n| n.node == Sym::new(node))
            .unwrap_or_else(|| panic!("{node} rejects the pod"))
    };
    assert_eq!(
        change("busy").change.as_deref(),
        Some("fits busy if its cpu request were ≤ 500m")
    );
    assert_eq!(
        change("tainted").change.as_deref(),
        Some("fits tainted with a toleration for dedicated=db:NoSchedule")
    );
    assert_eq!(
        change("cordoned").change.as_deref(),
        Some("fits cordoned if the node were uncordoned")
    );
    assert_eq!(
        change("both").rejected_by,
        ["TaintToleration", "NodeResourcesFit"]
    );
    assert_eq!(change("both").change, None, "two things stand in the way");

    // The busy node's pod has a higher priority: no preemption there. On the crowded
    // node one low-priority pod is enough; the higher one is spared.
    assert!(change("busy").preempting.is_none());
    let victims = change("crowded")
        .preempting
        .clone()
        .expect("preemption helps on crowded");
    let names: Vec<&str> = victims.iter().map(|p| &*p.name).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("low-"));

    assert_eq!(c.templates[0].nodes, Ok(1));
    let too_small = c.templates[1].nodes.clone().unwrap_err();
    assert!(too_small.contains("Insufficient cpu"), "{too_small}");
    assert_eq!(s.cluster().num_nodes(), 5, "every what-if was reverted");
    assert_eq!(
        s.cluster().node(Sym::new("crowded")).unwrap().pods().len(),
        3
    );
}
