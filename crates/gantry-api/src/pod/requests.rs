//! A pod's effective requests and usage (upstream's `PodRequests`), computed once per
//! template.

use super::PodTemplate;
use super::container::Container;
use crate::resources::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use crate::{ResourceName, Resources};

impl PodTemplate {
    /// The effective request of the pod to be placed: what the node must have free for it
    /// (upstream's `PodRequests` without status: pod-level requests replace the containers'
    /// aggregate, overhead added).
    #[inline]
    pub fn requests(&self) -> &Resources {
        &self.requests
    }

    /// The pod's requests with absent cpu/memory defaulted to 100m/200Mi per container, as
    /// NodeResourcesFit's score reads the pod to be placed (upstream's
    /// `calculatePodResourceRequest`). Pod-level requests do not replace the aggregate
    /// here: upstream builds Fit's scorer without its `enablePodLevelResources` flag
    /// (`noderesources/fit.go`, `nodeResourceStrategyTypeMap`, v1.32 to v1.35.4), so it
    /// skips them, while Filter, BalancedAllocation and the node's usage read them.
    #[inline]
    pub fn non_zero_requests(&self) -> &Resources {
        &self.non_zero_requests
    }

    /// What the pod holds on its node (`NodeInfo.Requested`): [`Self::requests`], or more
    /// while an in-place resize is under way (upstream's `CalculateResource`).
    #[inline]
    pub fn usage(&self) -> &Resources {
        self.usage.as_deref().unwrap_or(&self.requests)
    }

    /// The defaulted cpu and memory the pod adds to its node's `NonZeroRequested` (other
    /// resources zero).
    #[inline]
    pub fn non_zero_usage(&self) -> &Resources {
        &self.non_zero_usage
    }

    /// The resource whose request or usage added up to more than i64 holds (cpu in
    /// millicores, the rest in units) when [`update_requests`](Self::update_requests) said
    /// a sum did: the API server takes every quantity that fits alone, but
    /// kube-scheduler's int64 sum of them wraps. Sums saturate, so such a total stands at
    /// an end of i64; the decoder refuses the pod rather than schedule it with a saturated
    /// request. (A total of exactly i64::MAX that did not overflow is a request.)
    pub fn saturated_resource(&self) -> Option<crate::ResourceName> {
        [
            self.requests(),
            self.non_zero_requests(),
            self.usage(),
            self.non_zero_usage(),
        ]
        .into_iter()
        .find_map(Resources::first_saturated)
    }

    /// The containers' aggregate requests from the spec, without pod-level requests and
    /// overhead (upstream's `AggregateContainerRequests`, which the API server's defaulting
    /// and validation of pod-level resources read).
    pub fn aggregate_container_requests(&self) -> Resources {
        let defaults = Defaults {
            cpu: false,
            memory: false,
        };
        aggregate(self, Container::spec, defaults, &mut false)
    }

    /// Recomputes the derived requests from the containers, pod-level requests, overhead
    /// and rules. Call after changing any of them; the decoder and builders do. True when
    /// a sum went past i64 and saturated (see [`saturated_resource`](Self::saturated_resource)).
    pub fn update_requests(&mut self) -> bool {
        let mut overflow = false;
        const NONE: Defaults = Defaults {
            cpu: false,
            memory: false,
        };
        const BOTH: Defaults = Defaults {
            cpu: true,
            memory: true,
        };
        self.requests = pod_requests(self, Container::spec, NONE, &mut overflow);
        self.non_zero_requests = aggregate(self, Container::spec, BOTH, &mut overflow);
        if let Some(overhead) = &self.overhead {
            overflow |= self.non_zero_requests.add(overhead);
        }
        let usage = pod_requests(self, Container::held, NONE, &mut overflow);
        let non_zero = if !self.rules.non_zero_counts_sidecars {
            legacy_non_zero(self, &mut overflow)
        } else if let Some(pod_level) = &self.pod_level {
            // Upstream's getNonMissingContainerRequests: with pod-level requests, the
            // defaults fill only what is missing at every level.
            let named = |resource: ResourceName, unset: fn(&View<'_>) -> bool| {
                pod_level.names(resource)
                    || self.overhead.as_ref().is_some_and(|o| o.get(resource) != 0)
                    || (self.containers.iter())
                        .chain(self.init_containers.iter())
                        .any(|c| !unset(&c.held()))
            };
            let defaults = Defaults {
                cpu: !named(ResourceName::Cpu, |v| v.cpu_unset),
                memory: !named(ResourceName::Memory, |v| v.memory_unset),
            };
            if defaults.cpu || defaults.memory {
                pod_requests(self, Container::held, defaults, &mut overflow)
            } else {
                usage.clone()
            }
        } else {
            pod_requests(self, Container::held, BOTH, &mut overflow)
        };
        self.non_zero_usage = Resources::new(non_zero.milli_cpu, non_zero.memory);
        self.usage = (usage != self.requests).then(|| Box::new(usage));
        overflow
    }
}

/// A container's requests as one rule reads them.
pub(super) struct View<'a> {
    pub(super) requests: &'a Resources,
    pub(super) cpu_unset: bool,
    pub(super) memory_unset: bool,
}

/// Which of cpu and memory take their default where a container leaves them out
/// (upstream's `NonMissingContainerRequests`).
#[derive(Clone, Copy)]
struct Defaults {
    cpu: bool,
    memory: bool,
}

impl View<'_> {
    fn with(&self, defaults: Defaults) -> Resources {
        let mut r = self.requests.clone();
        if defaults.cpu && self.cpu_unset {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if defaults.memory && self.memory_unset {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
        r
    }
}

/// Upstream's `PodRequests` (component-helpers/resource/helpers.go): the containers'
/// aggregate (`AggregateContainerRequests`: the sum over regular containers and sidecars,
/// at least the largest init container's request counting the sidecars started before
/// it), then each pod-level request in place of the aggregate, then overhead.
fn pod_requests(
    pod: &PodTemplate,
    view: fn(&Container) -> View<'_>,
    defaults: Defaults,
    overflow: &mut bool,
) -> Resources {
    let mut total = aggregate(pod, view, defaults, overflow);
    if let Some(pod_level) = &pod.pod_level {
        for &resource in &pod_level.named {
            total.set(resource, pod_level.requests.get(resource));
        }
    }
    if let Some(overhead) = &pod.overhead {
        *overflow |= total.add(overhead);
    }
    total
}

/// Upstream's `AggregateContainerRequests`. Sums saturate at the ends of i64, and
/// `overflow` says so (see [`PodTemplate::saturated_resource`]).
fn aggregate(
    pod: &PodTemplate,
    view: fn(&Container) -> View<'_>,
    defaults: Defaults,
    overflow: &mut bool,
) -> Resources {
    let mut total = Resources::default();
    for c in &pod.containers {
        *overflow |= total.add(&view(c).with(defaults));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in &pod.init_containers {
        let r = view(c).with(defaults);
        if c.restartable {
            *overflow |= total.add(&r);
            *overflow |= sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            let mut during = r;
            *overflow |= during.add(&sidecars);
            init_peak.max_with(&during);
        }
    }
    total.max_with(&init_peak);
    total
}

/// The defaulted cpu and memory of a bound pod before v1.32 (`calculateResource` in
/// pkg/scheduler/framework/types.go at release-1.31): the regular containers' sum, at
/// least what each init container sees while it runs, each of these lists defaulted as
/// a whole (`GetNonzeroRequests` on the list `PodRequests` hands its `ContainerFn`: a
/// sidecar's is the sidecars' running sum, another init container's its own requests
/// plus that sum), sidecars not added to the regular containers; overhead added.
fn legacy_non_zero(pod: &PodTemplate, overflow: &mut bool) -> Resources {
    let non_zero = |r: &Resources, cpu_named: bool, memory_named: bool| {
        (
            if cpu_named {
                r.milli_cpu
            } else {
                DEFAULT_MILLI_CPU_REQUEST
            },
            if memory_named {
                r.memory
            } else {
                DEFAULT_MEMORY_REQUEST
            },
        )
    };
    let (mut cpu, mut memory) = (0i64, 0i64);
    for c in &pod.containers {
        let v = c.held();
        let (c, m) = non_zero(v.requests, !v.cpu_unset, !v.memory_unset);
        *overflow |= cpu.checked_add(c).is_none() || memory.checked_add(m).is_none();
        cpu = i64::saturating_add(cpu, c);
        memory = i64::saturating_add(memory, m);
    }
    let (mut init_cpu, mut init_memory) = (0, 0);
    let mut sidecars = Resources::default();
    let (mut sidecars_cpu, mut sidecars_memory) = (false, false);
    for c in &pod.init_containers {
        let v = c.held();
        let (c_cpu, c_memory) = if c.restartable {
            *overflow |= sidecars.add(v.requests);
            sidecars_cpu |= !v.cpu_unset;
            sidecars_memory |= !v.memory_unset;
            non_zero(&sidecars, sidecars_cpu, sidecars_memory)
        } else {
            let mut during = v.requests.clone();
            *overflow |= during.add(&sidecars);
            non_zero(
                &during,
                sidecars_cpu || !v.cpu_unset,
                sidecars_memory || !v.memory_unset,
            )
        };
        init_cpu = init_cpu.max(c_cpu);
        init_memory = init_memory.max(c_memory);
    }
    let mut out = Resources::new(cpu.max(init_cpu), memory.max(init_memory));
    if let Some(overhead) = &pod.overhead {
        *overflow |= out.add(&Resources::new(overhead.milli_cpu, overhead.memory));
    }
    out
}
