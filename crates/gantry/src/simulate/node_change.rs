//! `--compare-nodes FILE...` and `--compare-without-nodes KEY=VALUE,...`: B's node groups
//! changed from A's at the start, for "what if we replaced this pool": nodes matching the
//! labels are removed (their pods wait to be scheduled again), the files' nodes added
//! (replacing nodes of the same name).

use std::path::PathBuf;

use anyhow::Context;
use gantry_api::decode::ClusterObjects;
use gantry_api::{Node, Release, Sym};

use crate::load;

/// The change, read and checked.
pub struct NodeChange {
    added: Vec<Node>,
    /// Every pair must match for a node to go.
    without: Vec<(Sym, Sym)>,
}

/// What a change did to a cluster, for the comparison's title.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changed {
    pub removed: usize,
    pub added: usize,
    /// Pods bound to removed nodes, pending again.
    pub unbound: usize,
}

impl NodeChange {
    /// `None` when neither flag is given.
    pub fn read(
        files: &[PathBuf],
        without: Option<&str>,
        release: Release,
    ) -> anyhow::Result<Option<NodeChange>> {
        if files.is_empty() && without.is_none() {
            return Ok(None);
        }
        let mut added = load::manifests(files, release)?;
        load::note_unread(&added, "--compare-nodes", &["Node"], "it adds nodes only");
        added.admit().context("--compare-nodes")?;
        let without = match without {
            Some(text) => parse_labels(text)?,
            None => Vec::new(),
        };
        Ok(Some(NodeChange {
            added: added.nodes,
            without,
        }))
    }

    /// Applies the change to an admitted cluster, keeping its nodes in name order.
    pub fn apply(&self, cluster: &mut ClusterObjects) -> Changed {
        let mut changed = Changed::default();
        if !self.without.is_empty() {
            let goes = |node: &Node| {
                (self.without.iter()).all(|(key, value)| node.labels.get(*key) == Some(*value))
            };
            let removed: Vec<Sym> = cluster
                .nodes
                .iter()
                .filter(|n| goes(n))
                .map(|n| n.name)
                .collect();
            cluster.nodes.retain(|n| !removed.contains(&n.name));
            for pod in &mut cluster.pods {
                if pod.node_name.is_some_and(|n| removed.contains(&n)) {
                    pod.node_name = None;
                    changed.unbound += 1;
                }
            }
            changed.removed = removed.len();
        }
        for node in &self.added {
            cluster.nodes.retain(|n| n.name != node.name);
            cluster.nodes.push(node.clone());
            changed.added += 1;
        }
        cluster
            .nodes
            .sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        changed
    }
}

/// `key=value,key=value`: kubectl's equality selector, the only form taken.
fn parse_labels(text: &str) -> anyhow::Result<Vec<(Sym, Sym)>> {
    let mut pairs = Vec::new();
    for part in text.split(',') {
        let Some((key, value)) = part.split_once('=') else {
            anyhow::bail!("--compare-without-nodes: {part:?} is not key=value");
        };
        let (key, value) = (key.trim(), value.trim());
        anyhow::ensure!(
            !key.is_empty(),
            "--compare-without-nodes: {part:?} has no key"
        );
        pairs.push((Sym::new(key), Sym::new(value)));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_key_value_pairs() {
        let pairs = parse_labels("pool=old, zone=a").unwrap();
        assert_eq!(
            pairs,
            [
                (Sym::new("pool"), Sym::new("old")),
                (Sym::new("zone"), Sym::new("a"))
            ]
        );
        let error = parse_labels("pool").unwrap_err().to_string();
        assert_eq!(error, "--compare-without-nodes: \"pool\" is not key=value");
        assert!(parse_labels("=old").is_err());
    }
}
