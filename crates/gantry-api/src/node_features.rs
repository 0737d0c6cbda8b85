//! Node declared features (KEP-5328): what a node says its kubelet supports
//! (`status.declaredFeatures`), and what a pod's spec needs of them. The features the
//! scheduler infers for a pod, with the release that first infers each
//! (`component-helpers/nodedeclaredfeatures/features/registry.go`, v1.35.4 and v1.36.3).

use std::fmt;

/// A feature a pod can need of its node. Others a node declares are ignored, as
/// upstream's `TryMap` ignores names it does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFeature {
    /// A container's `restartPolicyRules` with action `RestartAllContainers` (v1.35 on).
    RestartAllContainersOnContainerExits,
    /// `hostNetwork: true` with `hostUsers: false` (v1.36 on).
    UserNamespacesHostNetworkSupport,
}

impl NodeFeature {
    pub const ALL: [NodeFeature; 2] = [
        NodeFeature::RestartAllContainersOnContainerExits,
        NodeFeature::UserNamespacesHostNetworkSupport,
    ];

    pub fn name(self) -> &'static str {
        match self {
            NodeFeature::RestartAllContainersOnContainerExits => {
                "RestartAllContainersOnContainerExits"
            }
            NodeFeature::UserNamespacesHostNetworkSupport => "UserNamespacesHostNetworkSupport",
        }
    }

    /// The first release whose scheduler infers this need from a pod.
    pub fn inferred_from(self) -> u8 {
        match self {
            NodeFeature::RestartAllContainersOnContainerExits => 35,
            NodeFeature::UserNamespacesHostNetworkSupport => 36,
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of [`NodeFeature`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NodeFeatures(u8);

impl NodeFeatures {
    /// The known features among `names` (a node's `status.declaredFeatures`).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> NodeFeatures {
        names
            .into_iter()
            .filter_map(|name| NodeFeature::ALL.into_iter().find(|f| f.name() == name))
            .fold(NodeFeatures::default(), |set, f| set.with(f))
    }

    pub fn with(self, feature: NodeFeature) -> NodeFeatures {
        NodeFeatures(self.0 | feature.bit())
    }

    pub fn contains(self, feature: NodeFeature) -> bool {
        self.0 & feature.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The features of this set that `release`'s scheduler infers.
    pub fn inferred_at(self, minor: u8) -> NodeFeatures {
        NodeFeature::ALL
            .into_iter()
            .filter(|f| self.contains(*f) && f.inferred_from() <= minor)
            .fold(NodeFeatures::default(), |set, f| set.with(f))
    }

    /// The features of this set that `declared` lacks.
    pub fn missing_from(self, declared: NodeFeatures) -> NodeFeatures {
        NodeFeatures(self.0 & !declared.0)
    }

    pub fn iter(self) -> impl Iterator<Item = NodeFeature> {
        NodeFeature::ALL
            .into_iter()
            .filter(move |f| self.contains(*f))
    }
}

impl fmt::Display for NodeFeatures {
    /// The names, joined with `, `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, feature) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(feature.name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_read_names_and_releases() {
        let declared =
            NodeFeatures::from_names(["RestartAllContainersOnContainerExits", "SomethingNew"]);
        assert!(declared.contains(NodeFeature::RestartAllContainersOnContainerExits));
        assert!(!declared.contains(NodeFeature::UserNamespacesHostNetworkSupport));
        let needs = NodeFeatures::default()
            .with(NodeFeature::RestartAllContainersOnContainerExits)
            .with(NodeFeature::UserNamespacesHostNetworkSupport);
        assert_eq!(
            needs.inferred_at(35),
            NodeFeatures::default().with(NodeFeature::RestartAllContainersOnContainerExits)
        );
        assert!(needs.inferred_at(34).is_empty());
        assert_eq!(
            needs.missing_from(declared).to_string(),
            "UserNamespacesHostNetworkSupport"
        );
    }
}
