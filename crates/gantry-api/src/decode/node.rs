//! Nodes: labels, taints, capacity and allocatable, images, readiness.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;

use super::object::{annotations, labels, resources};
use super::validation::{self, NameRule};
use super::{ObjectError, field_error};
use crate::{ContainerImage, Node, Sym, Taint, TaintEffect};

pub(super) fn convert_node(node: &k8s::Node, object: &str) -> Result<Node, ObjectError> {
    validation::object_meta(&node.metadata, object, NameRule::Dns1123Subdomain)?;
    let name = node.metadata.name.clone().unwrap_or_default();
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    let mut taints = Vec::new();
    for (i, taint) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.taints[{i}]");
        validation::check(
            validation::qualified_name(&taint.key),
            object,
            &format!("{at}.key"),
            &taint.key,
        )?;
        let effect = TaintEffect::parse(&taint.effect).ok_or_else(|| {
            field_error(
                object,
                format!("{at}.effect"),
                validation::not_supported(
                    &taint.effect,
                    &["NoExecute", "NoSchedule", "PreferNoSchedule"],
                ),
            )
        })?;
        // `validateNodeTaints`: one taint per key and effect.
        let key = Sym::new(&taint.key);
        if taints
            .iter()
            .any(|t: &Taint| t.key == key && t.effect == effect)
        {
            return Err(field_error(
                object,
                at,
                format!(
                    "{}: taints must be unique by key and effect pair",
                    validation::duplicate(&format!("{}:{}", taint.key, taint.effect))
                ),
            ));
        }
        taints.push(Taint {
            key,
            value: Sym::new(taint.value.as_deref().unwrap_or("")),
            effect,
        });
    }
    let capacity = resources(
        status.and_then(|s| s.capacity.as_ref()),
        object,
        &"status.capacity",
    )?;
    // A node that reports no allocatable offers its capacity, as the kubelet would.
    let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(map) => resources(Some(map), object, &"status.allocatable")?,
        None => capacity.clone(),
    };
    let images = status
        .and_then(|s| s.images.as_ref())
        .into_iter()
        .flatten()
        .map(|image| ContainerImage {
            names: image.names.iter().flatten().map(|n| Sym::new(n)).collect(),
            size_bytes: image.size_bytes.unwrap_or(0),
        })
        .collect();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let annotations = annotations(node.metadata.annotations.as_ref());
    let gpus = crate::gpu::parse_node_devices(&annotations)
        .map_err(|e| {
            field_error(
                object,
                format!("metadata.annotations[{:?}]", e.annotation),
                e.message,
            )
        })?
        .map(Arc::new);
    Ok(Node {
        name: Sym::new(&name),
        uid: Arc::from(node.metadata.uid.as_deref().unwrap_or(&name)),
        labels: labels(node.metadata.labels.as_ref()),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        capacity,
        allocatable,
        images,
        ready,
        annotations,
        gpus,
        declared_features: crate::node_features::NodeFeatures::from_names(
            status
                .and_then(|s| s.declared_features.as_ref())
                .into_iter()
                .flatten()
                .map(String::as_str),
        ),
    })
}
