//! Node and pod affinity, label selectors, and topology spread constraints, checked as
//! the API server checks them.

use std::fmt;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use smallvec::SmallVec;

use super::validation;
use super::{ObjectError, field_error};
use crate::labels::{
    LabelSelector, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Requirement, SelectorOp,
};
use crate::pod::*;
use crate::{Labels, Sym};

pub(super) fn values(v: Option<&Vec<String>>) -> SmallVec<[Sym; 2]> {
    v.into_iter().flatten().map(|s| Sym::new(s)).collect()
}

pub(crate) fn label_selector(
    sel: &meta::LabelSelector,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<LabelSelector, ObjectError> {
    let mut out = LabelSelector::from_pairs(
        sel.match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (Sym::new(k), Sym::new(v))),
    );
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let empty = Vec::new();
        let values = e.values.as_ref().unwrap_or(&empty);
        let requirement = Requirement::parse(&e.key, &e.operator, values).map_err(|e| {
            let part = e.part.unwrap_or("");
            let at = format!("{field}.matchExpressions[{i}].{part}");
            field_error(object, at, e.message)
        })?;
        out.requirements.push(requirement);
    }
    Ok(out)
}

fn node_selector_requirement(
    r: &k8s::NodeSelectorRequirement,
    object: &str,
    field: &dyn fmt::Display,
    is_field_selector: bool,
) -> Result<NodeSelectorRequirement, ObjectError> {
    let empty = Vec::new();
    NodeSelectorRequirement::parse(
        &r.key,
        &r.operator,
        r.values.as_ref().unwrap_or(&empty),
        is_field_selector,
    )
    .map_err(|e| {
        let at = match e.part {
            Some(part) => format!("{field}.{part}"),
            None => field.to_string(),
        };
        field_error(object, at, e.message)
    })
}

pub(super) fn node_selector_term(
    t: &k8s::NodeSelectorTerm,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<NodeSelectorTerm, ObjectError> {
    let convert = |list: Option<&Vec<k8s::NodeSelectorRequirement>>, name: &str, fields: bool| {
        list.into_iter()
            .flatten()
            .enumerate()
            .map(|(i, r)| {
                node_selector_requirement(r, object, &format_args!("{field}.{name}[{i}]"), fields)
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(NodeSelectorTerm {
        match_expressions: convert(t.match_expressions.as_ref(), "matchExpressions", false)?,
        match_fields: convert(t.match_fields.as_ref(), "matchFields", true)?,
    })
}

/// Upstream's `ValidateNodeSelector`: at least one term, each valid.
pub(crate) fn node_selector(
    selector: &k8s::NodeSelector,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<NodeSelector, ObjectError> {
    if selector.node_selector_terms.is_empty() {
        return Err(field_error(
            object,
            format!("{field}.nodeSelectorTerms"),
            validation::required("must have at least one node selector term"),
        ));
    }
    let terms = selector
        .node_selector_terms
        .iter()
        .enumerate()
        .map(|(i, t)| {
            node_selector_term(t, object, &format_args!("{field}.nodeSelectorTerms[{i}]"))
        })
        .collect::<Result<_, _>>()?;
    Ok(NodeSelector { terms })
}

fn weight(w: i32, object: &str, field: &dyn fmt::Display) -> Result<i32, ObjectError> {
    if (1..=100).contains(&w) {
        Ok(w)
    } else {
        Err(field_error(
            object,
            field.to_string(),
            format!("must be in the range 1-100, not {w}"),
        ))
    }
}

pub(super) fn convert_affinity(
    a: &k8s::Affinity,
    pod_labels: &Labels,
    object: &str,
) -> Result<Affinity, ObjectError> {
    let mut out = Affinity::default();
    if let Some(na) = &a.node_affinity {
        let base = "spec.affinity.nodeAffinity";
        if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
            let field = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution");
            out.node_affinity.required = Some(node_selector(req, object, &field)?);
        }
        for (i, p) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let field = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            out.node_affinity.preferred.push(PreferredSchedulingTerm {
                weight: weight(p.weight, object, &format_args!("{field}.weight"))?,
                term: node_selector_term(
                    &p.preference,
                    object,
                    &format_args!("{field}.preference"),
                )?,
            });
        }
    }
    if let Some(pa) = &a.pod_affinity {
        out.pod_affinity = pod_affinity(
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
            pod_labels,
            object,
            "spec.affinity.podAffinity",
        )?;
    }
    if let Some(pa) = &a.pod_anti_affinity {
        out.pod_anti_affinity = pod_affinity(
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
            pod_labels,
            object,
            "spec.affinity.podAntiAffinity",
        )?;
    }
    Ok(out)
}

fn pod_affinity(
    required: Option<&Vec<k8s::PodAffinityTerm>>,
    preferred: Option<&Vec<k8s::WeightedPodAffinityTerm>>,
    pod_labels: &Labels,
    object: &str,
    base: &str,
) -> Result<PodAffinity, ObjectError> {
    let mut out = PodAffinity::default();
    for (i, t) in required.into_iter().flatten().enumerate() {
        let field = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.required
            .push(pod_affinity_term(t, pod_labels, object, &field)?);
    }
    for (i, w) in preferred.into_iter().flatten().enumerate() {
        let field = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.preferred.push(WeightedPodAffinityTerm {
            weight: weight(w.weight, object, &format_args!("{field}.weight"))?,
            term: pod_affinity_term(
                &w.pod_affinity_term,
                pod_labels,
                object,
                &format_args!("{field}.podAffinityTerm"),
            )?,
        });
    }
    Ok(out)
}

/// Adds `key In [pod's value]` (or `NotIn` for mismatch keys) for each listed key the pod
/// has, as the API server does for `matchLabelKeys` / `mismatchLabelKeys`.
fn merge_label_keys(
    selector: &mut Option<LabelSelector>,
    keys: &[String],
    op: SelectorOp,
    pod_labels: &Labels,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<(), ObjectError> {
    if keys.is_empty() {
        return Ok(());
    }
    let Some(selector) = selector else {
        return Err(field_error(object, field.to_string(), NO_SELECTOR));
    };
    require_pod_label_values(selector, keys, op, pod_labels);
    Ok(())
}

/// Upstream's message for label keys without a selector to narrow.
const NO_SELECTOR: &str = "must not be specified when labelSelector is not set";

/// Upstream's check of `matchLabelKeys` against the selector they narrow
/// (`ValidateMatchLabelKeysAndMismatchLabelKeys`), on the selector as the API server
/// holds it after merging the keys in: a key the pod has that the selector already
/// names gives a second requirement on it. `merged` is false where the API server does
/// not merge (spread constraints before v1.34): then any key the selector names is
/// refused (`ValidateMatchLabelKeysInTopologySpread`). The index of the key refused.
fn label_key_also_in_selector(
    keys: &[String],
    selector: &meta::LabelSelector,
    pod_labels: &Labels,
    merged: bool,
) -> Option<usize> {
    let expressions = selector.match_expressions.iter().flatten();
    let mut named: Vec<&str> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    if !merged {
        named.extend(expressions.map(|e| e.key.as_str()));
        return keys.iter().position(|k| named.contains(&k.as_str()));
    }
    let pod_keys = keys.iter().filter(|k| pod_labels.get_str(k).is_some());
    for key in expressions
        .map(|e| e.key.as_str())
        .chain(pod_keys.map(String::as_str))
    {
        // Upstream keeps each key's last index.
        let listed = keys.iter().rposition(|k| k == key);
        if let Some(i) = listed
            && named.contains(&key)
        {
            return Some(i);
        }
        named.push(key);
    }
    None
}

/// Refuses label keys the selector already names, and a key in both matchLabelKeys and
/// mismatchLabelKeys, with upstream's messages.
fn check_label_keys(
    selector: Option<&meta::LabelSelector>,
    match_keys: &[String],
    mismatch_keys: &[String],
    pod_labels: &Labels,
    merged: bool,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<(), ObjectError> {
    if let Some(selector) = selector
        && let Some(i) = label_key_also_in_selector(match_keys, selector, pod_labels, merged)
    {
        return Err(field_error(
            object,
            format!("{field}.matchLabelKeys[{i}]"),
            validation::invalid(
                &match_keys[i],
                "exists in both matchLabelKeys and labelSelector",
            ),
        ));
    }
    if let Some(i) = match_keys.iter().position(|k| mismatch_keys.contains(k)) {
        return Err(field_error(
            object,
            format!("{field}.matchLabelKeys[{i}]"),
            validation::invalid(
                &match_keys[i],
                "exists in both matchLabelKeys and mismatchLabelKeys",
            ),
        ));
    }
    Ok(())
}

/// For each of `keys` the pod has a label for: a requirement `key op [its value]` (how
/// matchLabelKeys and mismatchLabelKeys narrow a selector to the pod's own values).
fn require_pod_label_values(
    selector: &mut LabelSelector,
    keys: &[String],
    op: SelectorOp,
    pod_labels: &Labels,
) {
    for key in keys {
        if let Some(value) = pod_labels.get_str(key) {
            selector.requirements.push(Requirement {
                key: Sym::new(key),
                op,
                values: smallvec::smallvec![value],
            });
        }
    }
}

/// A topology key, required by both pod affinity terms and spread constraints.
fn require_topology_key(
    key: &str,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<(), ObjectError> {
    if key.is_empty() {
        return Err(field_error(
            object,
            format!("{field}.topologyKey"),
            "required",
        ));
    }
    Ok(())
}

/// A selector that may be absent, decoded (errors name `field`).
fn optional_selector(
    s: Option<&meta::LabelSelector>,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<Option<LabelSelector>, ObjectError> {
    s.map(|s| label_selector(s, object, field)).transpose()
}

fn pod_affinity_term(
    t: &k8s::PodAffinityTerm,
    pod_labels: &Labels,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<PodAffinityTerm, ObjectError> {
    require_topology_key(&t.topology_key, object, field)?;
    let mut label_selector = optional_selector(
        t.label_selector.as_ref(),
        object,
        &format_args!("{field}.labelSelector"),
    )?;
    let empty = Vec::new();
    check_label_keys(
        t.label_selector.as_ref(),
        t.match_label_keys.as_ref().unwrap_or(&empty),
        t.mismatch_label_keys.as_ref().unwrap_or(&empty),
        pod_labels,
        true,
        object,
        field,
    )?;
    merge_label_keys(
        &mut label_selector,
        t.match_label_keys.as_ref().unwrap_or(&empty),
        SelectorOp::In,
        pod_labels,
        object,
        &format_args!("{field}.matchLabelKeys"),
    )?;
    merge_label_keys(
        &mut label_selector,
        t.mismatch_label_keys.as_ref().unwrap_or(&empty),
        SelectorOp::NotIn,
        pod_labels,
        object,
        &format_args!("{field}.mismatchLabelKeys"),
    )?;
    Ok(PodAffinityTerm {
        label_selector,
        namespaces: t.namespaces.iter().flatten().map(|n| Sym::new(n)).collect(),
        namespace_selector: optional_selector(
            t.namespace_selector.as_ref(),
            object,
            &format_args!("{field}.namespaceSelector"),
        )?,
        topology_key: Sym::new(&t.topology_key),
    })
}

fn inclusion_policy(
    v: Option<&str>,
    default: InclusionPolicy,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<InclusionPolicy, ObjectError> {
    match v {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(field_error(
            object,
            field.to_string(),
            format!("must be Honor or Ignore, not {other:?}"),
        )),
    }
}

/// A topology spread constraint; `merges_keys` when the API server merges `matchLabelKeys`
/// into the selector (MatchLabelKeysInPodTopologySpreadSelectorMerge), which changes how
/// it validates them.
pub(super) fn spread_constraint(
    c: &k8s::TopologySpreadConstraint,
    pod_labels: &Labels,
    merges_keys: bool,
    object: &str,
    field: &dyn fmt::Display,
) -> Result<TopologySpreadConstraint, ObjectError> {
    if c.max_skew <= 0 {
        return Err(field_error(
            object,
            format!("{field}.maxSkew"),
            format!("must be greater than zero, not {}", c.max_skew),
        ));
    }
    require_topology_key(&c.topology_key, object, field)?;
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(field_error(
                object,
                format!("{field}.whenUnsatisfiable"),
                format!("must be DoNotSchedule or ScheduleAnyway, not {other:?}"),
            ));
        }
    };
    if let Some(m) = c.min_domains
        && (m <= 0 || when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule)
    {
        return Err(field_error(
            object,
            format!("{field}.minDomains"),
            "must be greater than zero, and set only with whenUnsatisfiable DoNotSchedule",
        ));
    }
    let mut label_selector = optional_selector(
        c.label_selector.as_ref(),
        object,
        &format_args!("{field}.labelSelector"),
    )?;
    if let Some(keys) = c.match_label_keys.as_ref().filter(|keys| !keys.is_empty()) {
        let Some(selector) = &mut label_selector else {
            return Err(field_error(
                object,
                format!("{field}.matchLabelKeys"),
                NO_SELECTOR,
            ));
        };
        let written = c.label_selector.as_ref().expect("decoded above");
        check_label_keys(
            Some(written),
            keys,
            &[],
            pod_labels,
            merges_keys,
            object,
            field,
        )?;
        require_pod_label_values(selector, keys, SelectorOp::In, pod_labels);
    }
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: Sym::new(&c.topology_key),
        when_unsatisfiable,
        label_selector,
        min_domains: c.min_domains,
        node_affinity_policy: inclusion_policy(
            c.node_affinity_policy.as_deref(),
            InclusionPolicy::Honor,
            object,
            &format_args!("{field}.nodeAffinityPolicy"),
        )?,
        node_taints_policy: inclusion_policy(
            c.node_taints_policy.as_deref(),
            InclusionPolicy::Ignore,
            object,
            &format_args!("{field}.nodeTaintsPolicy"),
        )?,
    })
}
