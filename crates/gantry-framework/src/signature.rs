//! OpportunisticBatching's pod signatures (KEP-5598, on from v1.35): two pods with one
//! signature pass the same Filters and get the same Scores on every node in one state, so
//! the ranking of one pod's cycle serves the next (`gantry-scheduler`'s `batch.rs`).
//!
//! Upstream (`framework/runtime/framework.go`, `SignPod`) merges what each PreFilter,
//! Filter, PreScore and Score plugin says of the pod into one map keyed by the signer's
//! name (`kube-scheduler/framework/signers.go`), and signs nothing when a plugin cannot
//! sign or refuses the pod. The values here are Gantry's own spelling of the same fields,
//! normalised as upstream's signers normalise them (sorted terms, sorted tolerations,
//! sets of ports and images), so that two pods compare equal exactly when upstream's
//! JSON would.

use std::collections::BTreeMap;
use std::fmt::Debug;

use gantry_api::Pod;

/// The signer names upstream keys its fragments by.
pub mod signer {
    pub const SCHEDULER_NAME: &str = "v1.Pod.Spec.SchedulerName";
    pub const RESOURCES: &str = "v1.Pod.Spec.ContainerRequestsAndOverheads()";
    pub const LABELS: &str = "v1.Pod.Labels";
    pub const IMAGE_NAMES: &str = "v1.Pod.Spec.CanonicalImageNames()";
    pub const NODE_NAME: &str = "v1.Pod.Spec.NodeName";
    pub const NODE_AFFINITY: &str = "v1.Pod.Spec.Affinity.NodeAffinity";
    pub const NODE_SELECTOR: &str = "v1.Pod.Spec.Affinity.NodeSelector";
    pub const HOST_PORTS: &str = "v1.Pod.Spec.HostPorts()";
    pub const TOLERATIONS: &str = "v1.Pod.Spec.Tolerations";
    pub const VOLUMES: &str = "v1.Pod.Spec.Volumes.NonSyntheticSources()";
    pub const FEATURES: &str = "v1.Pod.Spec.RequiredFeatures()";
}

/// A pod's signature: what every signing plugin reads of it, by signer name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signature {
    fragments: BTreeMap<&'static str, String>,
}

impl Signature {
    /// A signature holding only the pod's scheduler name, as upstream's starts.
    pub fn new(pod: &Pod) -> Signature {
        let mut signature = Signature::default();
        signature.add(signer::SCHEDULER_NAME, &pod.scheduler_name.as_str());
        signature
    }

    /// Sets the fragment `key` to `value`'s spelling (a plugin signing what another
    /// already signed writes the same value, as upstream's map assignment does).
    pub fn add(&mut self, key: &'static str, value: &impl Debug) {
        self.fragments.insert(key, format!("{value:?}"));
    }

    /// Sets the fragment `key` to the sorted spellings of `values`: a set, or a list whose
    /// order upstream's signer sorts away.
    pub fn add_sorted<T: Debug>(&mut self, key: &'static str, values: impl IntoIterator<Item = T>) {
        self.add(key, &sorted_spellings(values));
    }
}

/// The spellings of `values`, sorted and without repeats: a list whose order does not
/// matter, as upstream's signers sort theirs.
pub fn sorted_spellings<T: Debug>(values: impl IntoIterator<Item = T>) -> Vec<String> {
    let mut spelled: Vec<String> = values.into_iter().map(|v| format!("{v:?}")).collect();
    spelled.sort_unstable();
    spelled.dedup();
    spelled
}

/// The signers several plugins share (upstream's common signers).
impl Signature {
    /// NodeResourcesFit and BalancedAllocation: the pod's requests with overhead, init
    /// containers and pod-level resources (`computePodResourceRequest`).
    pub fn add_resources(&mut self, pod: &Pod) {
        self.add(signer::RESOURCES, pod.requests());
    }

    /// NodeUnschedulable and TaintToleration: the tolerations, in any order.
    pub fn add_tolerations(&mut self, pod: &Pod) {
        self.add_sorted(signer::TOLERATIONS, &pod.tolerations);
    }

    /// The volume plugins: every volume that can matter to a node, in any order, without
    /// its name (`VolumesSigner` leaves out ConfigMaps and Secrets; Gantry keeps no other
    /// source of the kinds that cannot matter, so those are left out with them). A generic
    /// ephemeral volume signs as its template does, not by its per-pod claim name.
    pub fn add_volumes(&mut self, pod: &Pod) {
        let volumes = pod
            .volumes
            .iter()
            .filter(|v| v.claim_name.is_some() || v.disk.is_some() || v.local || v.ephemeral)
            .map(|v| {
                let claim = v.claim_name.as_deref().filter(|_| !v.ephemeral);
                (claim, v.read_only, &v.disk, v.local, v.ephemeral)
            });
        self.add_sorted(signer::VOLUMES, volumes);
    }

    /// NodePorts: the set of host ports of every container and init container.
    pub fn add_host_ports(&mut self, pod: &Pod) {
        let ports = (pod.containers.iter())
            .chain(&pod.init_containers)
            .flat_map(|c| c.host_ports.iter().map(|p| p.port));
        self.add_sorted(signer::HOST_PORTS, ports);
    }
}

#[cfg(test)]
mod tests {
    use gantry_api::Release;
    use gantry_api::decode::ClusterObjects;

    use crate::CycleState;
    use crate::config::SchedulerConfig;

    /// A profile that can sign: PodTopologySpread without default constraints.
    const CAN_SIGN: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultingType: List}\n";

    fn profile(config: &str, minor: u8) -> crate::Profile {
        let release = Release::parse(Some(&format!("1.{minor}")), None).unwrap();
        let config = SchedulerConfig::parse_for(config, "config.yaml", release).unwrap();
        config.profiles.into_iter().next().unwrap()
    }

    /// A pod of 3 CPU whose spec gets `extra` (flow-style YAML fields) and metadata `meta`.
    fn pod(name: &str, meta: &str, extra: &str) -> gantry_api::Pod {
        pod_with(name, meta, "app:1", "cpu: '3'", extra)
    }

    fn pod_with(
        name: &str,
        meta: &str,
        image: &str,
        requests: &str,
        extra: &str,
    ) -> gantry_api::Pod {
        let text = format!(
            "kind: Pod\nmetadata: {{name: {name}, namespace: ns-{name}{meta}}}\nspec: {{containers: [{{name: c, image: {image}, resources: {{requests: {{{requests}}}, limits: {{{requests}}}}}}}]{extra}}}\n"
        );
        let mut objects = ClusterObjects::decode(&text, "pod.yaml").unwrap();
        objects.resolve_priorities().unwrap();
        objects.pods.remove(0)
    }

    /// Each fragment a plugin signs tells pods apart, names and namespaces do not, and
    /// lists upstream sorts compare in any order; the refusals sign nothing.
    #[test]
    fn signatures_follow_upstreams_signers() {
        let p = profile(CAN_SIGN, 36);
        let base = p
            .sign(&pod("a", "", ""), &CycleState::default())
            .expect("a plain pod is signable");
        let toleration = |key: &str| format!("{{key: {key}, operator: Exists}}");
        let (t1, t2) = (toleration("k1"), toleration("k2"));
        assert_eq!(
            p.sign(&pod("b", "", ""), &CycleState::default()).as_ref(),
            Some(&base),
            "another name"
        );
        assert_eq!(
            p.sign(
                &pod_with("a", "", "app", "cpu: '3'", ""),
                &CycleState::default()
            ),
            p.sign(
                &pod_with("a", "", "app:latest", "cpu: '3'", ""),
                &CycleState::default()
            ),
            "an image without a tag is :latest"
        );
        let tolerations = |a: &str, b: &str| pod("a", "", &format!(", tolerations: [{a}, {b}]"));
        assert_eq!(
            p.sign(&tolerations(&t1, &t2), &CycleState::default()),
            p.sign(&tolerations(&t2, &t1), &CycleState::default()),
            "tolerations in any order"
        );
        let differ = [
            ("labels", pod("a", ", labels: {app: x}", "")),
            ("requests", pod_with("a", "", "app:1", "cpu: '2'", "")),
            ("images", pod_with("a", "", "app:2", "cpu: '3'", "")),
            (
                "tolerations",
                pod("a", "", &format!(", tolerations: [{t1}]")),
            ),
            ("node selector", pod("a", "", ", nodeSelector: {disk: ssd}")),
            ("scheduler name", pod("a", "", ", schedulerName: other")),
            (
                "volumes",
                pod(
                    "a",
                    "",
                    ", volumes: [{name: v, persistentVolumeClaim: {claimName: c}}]",
                ),
            ),
        ];
        for (why, other) in differ {
            let signed = p
                .sign(&other, &CycleState::default())
                .unwrap_or_else(|| panic!("{why}: signable"));
            assert_ne!(signed, base, "{why}");
        }
        let refused = [
            (
                "spread constraints",
                pod(
                    "a",
                    "",
                    ", topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
                ),
            ),
            (
                "pod affinity",
                pod(
                    "a",
                    "",
                    ", affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, labelSelector: {}}]}}",
                ),
            ),
            (
                "HAMi's shared cards",
                pod_with("a", "", "app:1", "cpu: '3', nvidia.com/gpu: 1", ""),
            ),
        ];
        for (why, other) in refused {
            assert_eq!(p.sign(&other, &CycleState::default()), None, "{why}");
        }
        // The default profile's PodTopologySpread has system default constraints, and
        // before v1.35 there is no batching.
        assert_eq!(
            profile(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
                36
            )
            .sign(&pod("a", "", ""), &CycleState::default()),
            None
        );
        assert_eq!(
            profile(CAN_SIGN, 34).sign(&pod("a", "", ""), &CycleState::default()),
            None
        );
    }
}
