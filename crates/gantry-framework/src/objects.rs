//! API objects other than nodes and pods that plugins read: namespaces (for namespace
//! selectors) and services (for the default topology spread selector).

use std::collections::HashMap;

use foldhash::fast::RandomState;
use gantry_api::decode::{Namespace, Service};
use gantry_api::{LabelSelector, Labels, Pod, Sym};

#[derive(Debug, Clone, Default)]
pub struct ApiObjects {
    namespaces: HashMap<Sym, Labels, RandomState>,
    services: Vec<Service>,
}

impl ApiObjects {
    pub fn new(namespaces: &[Namespace], services: &[Service]) -> ApiObjects {
        ApiObjects {
            namespaces: namespaces
                .iter()
                .map(|n| (n.name, n.labels.clone()))
                .collect(),
            services: services.to_vec(),
        }
    }

    pub fn set_namespace(&mut self, namespace: Namespace) {
        self.namespaces.insert(namespace.name, namespace.labels);
    }

    pub fn add_service(&mut self, service: Service) {
        self.services.push(service);
    }

    /// The namespace's labels (empty for a namespace never seen).
    pub fn namespace_labels(&self, namespace: Sym) -> &Labels {
        static EMPTY: std::sync::LazyLock<Labels> = std::sync::LazyLock::new(Labels::default);
        self.namespaces.get(&namespace).unwrap_or(&EMPTY)
    }

    /// Upstream's `helper.DefaultSelector`: the selectors of the services in the pod's
    /// namespace that select it, merged. `None` when no service selects the pod.
    pub fn default_selector(&self, pod: &Pod) -> Option<LabelSelector> {
        let mut merged = LabelSelector::default();
        let mut any = false;
        for service in &self.services {
            if service.namespace == pod.namespace
                && !service.selector.is_empty()
                && service.selector.matches(&pod.labels)
            {
                any = true;
                merged
                    .requirements
                    .extend(service.selector.requirements.iter().cloned());
            }
        }
        any.then_some(merged)
    }
}
