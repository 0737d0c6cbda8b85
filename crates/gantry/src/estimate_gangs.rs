//! The gangs among `estimate`'s pending pods: members of a GenericWorkload PodGroup with a
//! gang policy (`minCount`) or of a Coscheduling PodGroup (`minMember`). Scale-up places
//! each all or nothing (see [`gantry_whatif::estimator::Gang`]).

use std::sync::Arc;

use gantry_api::decode::ClusterObjects;
use gantry_api::{GroupPolicy, Pod, Sym, coscheduling};
use gantry_whatif::estimator::Gang;
use gantry_whatif::{ClusterSnapshot, Destinations, SchedulingError};

/// The group a pod belongs to and the members that group needs placed in all, if it is a
/// gang: `(namespace, name, minimum)`.
fn gang_of(pod: &Pod, cluster: &ClusterObjects) -> Option<(Sym, Sym, usize)> {
    if let Some(name) = pod.scheduling_group {
        let group =
            (cluster.pod_groups.iter()).find(|g| g.namespace == pod.namespace && g.name == name)?;
        return match group.policy {
            GroupPolicy::Gang { min_count } => Some((pod.namespace, name, min_count as usize)),
            GroupPolicy::Basic => None,
        };
    }
    let name = coscheduling::group_name(pod)?;
    let group = (cluster.coscheduling_groups.iter())
        .find(|g| g.namespace == pod.namespace && g.name == name)?;
    Some((pod.namespace, name, group.min_member as usize))
}

/// A pending pod of no gang, or a gang (at its first member's place).
pub enum Pending {
    Single(Arc<Pod>),
    Gang(Gang),
}

/// `pending` in its order, each gang whole where its first member is, needing its minimum
/// less its members already bound in the cluster.
pub fn in_order(pending: &[Arc<Pod>], cluster: &ClusterObjects) -> Vec<Pending> {
    let mut out: Vec<Pending> = Vec::new();
    // Each gang's place in `out`, by namespace and name.
    let mut places: Vec<((Sym, Sym), usize)> = Vec::new();
    for pod in pending {
        let Some((namespace, name, minimum)) = gang_of(pod, cluster) else {
            out.push(Pending::Single(pod.clone()));
            continue;
        };
        if let Some(&(_, at)) = places.iter().find(|(key, _)| *key == (namespace, name)) {
            if let Pending::Gang(gang) = &mut out[at] {
                gang.pods.push(pod.clone());
            }
            continue;
        }
        let bound = (cluster.pods.iter())
            .filter(|p| p.node_name.is_some())
            .filter(|p| gang_of(p, cluster).is_some_and(|g| (g.0, g.1) == (namespace, name)))
            .count();
        places.push(((namespace, name), out.len()));
        out.push(Pending::Gang(Gang {
            name: format!("{namespace}/{name}"),
            pods: vec![pod.clone()],
            needed: minimum.saturating_sub(bound),
        }));
    }
    out
}

/// A gang kept on the existing nodes: its members placed (with their nodes), and those
/// left over, which need no gang any more.
pub struct Kept {
    pub placed: Vec<(Arc<Pod>, Sym)>,
    pub rest: Vec<Arc<Pod>>,
}

/// The gang on the existing nodes, all or nothing: its members placed where each fits,
/// kept if at least `needed` fit, otherwise given back (`None`).
pub fn place_on_existing(
    snapshot: &mut ClusterSnapshot,
    gang: &Gang,
) -> Result<Option<Kept>, SchedulingError> {
    snapshot.fork();
    let mut placed = Vec::new();
    let mut left = Vec::new();
    for pod in &gang.pods {
        match snapshot.place_anywhere(pod, &Destinations::ANY) {
            Ok(Some(node)) => placed.push((pod.clone(), node)),
            Ok(None) => left.push(pod.clone()),
            Err(e) => {
                snapshot.revert().expect("forked above");
                return Err(e);
            }
        }
    }
    if placed.len() >= gang.needed {
        snapshot.commit().expect("forked above");
        Ok(Some(Kept { placed, rest: left }))
    } else {
        snapshot.revert().expect("forked above");
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::PodGroup;

    fn member(name: &str, group: &str, node: Option<&str>) -> Pod {
        let mut pod = Pod::new("ml", name);
        pod.scheduling_group = Some(Sym::new(group));
        pod.node_name = node.map(Sym::new);
        pod
    }

    /// A PodGroup's gang is gathered whole where its first member is, needing its
    /// `minCount` less its members already bound; a basic group's members and pods of no
    /// group stand alone.
    #[test]
    fn gangs_are_gathered_in_order_less_their_bound_members() {
        let mut cluster = ClusterObjects::default();
        cluster.pod_groups = vec![
            PodGroup::gang("ml", "train", 4),
            PodGroup {
                policy: GroupPolicy::Basic,
                ..PodGroup::gang("ml", "serve", 2)
            },
        ];
        cluster.pods = vec![member("bound-0", "train", Some("n1"))];
        let pending: Vec<Arc<Pod>> = [
            member("serve-0", "serve", None),
            member("train-0", "train", None),
            Pod::new("ml", "lone"),
            member("train-1", "train", None),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let units = in_order(&pending, &cluster);
        let shape: Vec<String> = units
            .iter()
            .map(|unit| match unit {
                Pending::Single(pod) => pod.name.to_string(),
                Pending::Gang(gang) => format!(
                    "{} {:?} needs {}",
                    gang.name,
                    gang.pods
                        .iter()
                        .map(|p| p.name.to_string())
                        .collect::<Vec<_>>(),
                    gang.needed
                ),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "serve-0",
                "ml/train [\"train-0\", \"train-1\"] needs 3",
                "lone"
            ]
        );
    }
}
