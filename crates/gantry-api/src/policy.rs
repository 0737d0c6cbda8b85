//! PodDisruptionBudgets (`policy/v1`), as DefaultPreemption reads them: which pods a budget
//! covers, and how many of them may be disrupted now (`status.disruptionsAllowed`, kept
//! current by the disruption controller; the scheduler only reads it).

use std::sync::Arc;

use k8s_openapi::api::policy::v1 as k8s;

use crate::decode::{ObjectError, field_error, label_selector, required_name};
use crate::{LabelSelector, Pod, Sym};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDisruptionBudget {
    pub namespace: Sym,
    pub name: Arc<str>,
    /// `spec.selector`; absent or empty, it covers no pod (as preemption reads it).
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed` (0 when there is no status yet).
    pub disruptions_allowed: i32,
    /// The names in `status.disruptedPods`: evictions the API server processed that the
    /// disruption controller has not counted yet.
    pub disrupted_pods: Vec<Arc<str>>,
}

impl PodDisruptionBudget {
    /// Upstream's test in `filterPodsWithPDBViolation`: same namespace, and a non-empty
    /// selector that matches the pod's labels.
    pub fn covers(&self, pod: &Pod) -> bool {
        self.namespace == pod.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| !s.is_empty() && s.matches(&pod.labels))
    }

    /// Whether the pod's eviction was already processed (it must not be counted again).
    pub fn has_disrupted(&self, pod: &Pod) -> bool {
        self.disrupted_pods.contains(&pod.name)
    }
}

/// Converts a typed `PodDisruptionBudget` (from a manifest or a watch).
pub(crate) fn convert(
    pdb: &k8s::PodDisruptionBudget,
    object: &str,
) -> Result<PodDisruptionBudget, ObjectError> {
    let selector = pdb
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .map(|s| label_selector(s, object, &"spec.selector"))
        .transpose()?;
    if let Some(spec) = &pdb.spec {
        check_budget(spec, object)?;
    }
    let status = pdb.status.as_ref();
    Ok(PodDisruptionBudget {
        namespace: Sym::new(pdb.metadata.namespace.as_deref().unwrap_or("default")),
        name: Arc::from(required_name(&pdb.metadata, object)?),
        selector,
        disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
        disrupted_pods: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .into_iter()
            .flat_map(|pods| pods.keys())
            .map(|name| Arc::from(name.as_str()))
            .collect(),
    })
}

/// kube-apiserver's `ValidatePodDisruptionBudgetSpec`: at most one of the two fields,
/// each a non-negative integer or a percentage of at most 100%.
fn check_budget(spec: &k8s::PodDisruptionBudgetSpec, object: &str) -> Result<(), ObjectError> {
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        return Err(field_error(
            object,
            "spec",
            "Invalid value: minAvailable and maxUnavailable cannot be both set",
        ));
    }
    let fields = [
        ("spec.minAvailable", &spec.min_available),
        ("spec.maxUnavailable", &spec.max_unavailable),
    ];
    for (field, value) in fields {
        let message = match value {
            Some(IntOrString::Int(n)) if *n < 0 => {
                format!("Invalid value: {n}: must be greater than or equal to 0")
            }
            Some(IntOrString::String(text)) => {
                match text.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
                    None => format!(
                        "Invalid value: {text:?}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
                    ),
                    Some(p) if p > 100 => {
                        format!("Invalid value: {text:?}: must not be greater than 100%")
                    }
                    Some(_) => continue,
                }
            }
            _ => continue,
        };
        return Err(field_error(object, field, message));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::ClusterObjects;

    const BUDGETS: &str = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
status:
  currentHealthy: 3
  desiredHealthy: 2
  disruptionsAllowed: 1
  expectedPods: 3
  disruptedPods: {web-0: "2024-01-01T00:00:00Z"}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: everything, namespace: shop}
spec: {maxUnavailable: 1, selector: {}}
"#;

    #[test]
    fn budgets_decode_with_selector_and_status() {
        let objects = ClusterObjects::decode(BUDGETS, "pdbs.yaml").unwrap();
        let [web, everything] = &objects.pdbs[..] else {
            panic!("two budgets: {:?}", objects.pdbs);
        };
        assert_eq!(web.namespace, Sym::new("shop"));
        assert_eq!(web.disruptions_allowed, 1);
        assert_eq!(web.disrupted_pods, [Arc::from("web-0")]);
        assert_eq!(
            everything.disruptions_allowed, 0,
            "no status: nothing allowed"
        );

        let pod = |ns: &str, name: &str, app: &str| Pod::new(ns, name).with_labels([("app", app)]);
        assert!(web.covers(&pod("shop", "web-1", "web")));
        assert!(
            !web.covers(&pod("other", "web-1", "web")),
            "other namespace"
        );
        assert!(!web.covers(&pod("shop", "db-1", "db")));
        assert!(
            !everything.covers(&pod("shop", "web-1", "web")),
            "empty selector: no pod"
        );
        assert!(web.has_disrupted(&pod("shop", "web-0", "web")));
        assert!(!web.has_disrupted(&pod("shop", "web-1", "web")));
    }

    #[test]
    fn a_bad_selector_names_the_field() {
        let text = r#"{"kind": "PodDisruptionBudget", "metadata": {"name": "x", "namespace": "a"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}}}"#;
        let error = ClusterObjects::decode(text, "pdb.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("PodDisruptionBudget a/x: spec.selector.matchExpressions[0]"),
            "{error}"
        );
    }
}
