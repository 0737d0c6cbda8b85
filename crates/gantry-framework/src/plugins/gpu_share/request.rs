//! What a pod asks of HAMi: per container, after HAMi's admission webhook would have
//! mutated it (`MutateAdmission`) and as its scheduler reads it
//! (`GenerateResourceRequests`); and the pod's steering annotations.

use std::sync::LazyLock;

use gantry_api::gpu;
use gantry_api::{Container, Pod, Sym};
use smallvec::SmallVec;

use super::GpuShare;
use super::policy::{GpuPolicy, NodePolicy, Weights, node_policy, valid_gpu_policy};

/// HAMi's "no memory percentage given" value.
pub const NO_PERCENTAGE: i32 = 101;

/// One container's request: `nums` cards, each giving `memory_mib` MiB (or
/// `memory_percentage` percent of the card's memory) and `cores` percent of compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CardRequest {
    pub nums: i32,
    pub memory_mib: i32,
    pub memory_percentage: i32,
    pub cores: i32,
}

impl CardRequest {
    /// The memory the container takes on a card of `card_memory` MiB (HAMi's `memreq`).
    pub fn memory_on(&self, card_memory: i32) -> i32 {
        if self.memory_mib > 0 {
            self.memory_mib
        } else if self.memory_percentage != NO_PERCENTAGE {
            card_memory.wrapping_mul(self.memory_percentage) / 100
        } else {
            0
        }
    }

    /// The compute the container takes on a card: HAMi's Fit clamps the request to 100
    /// ("core limit can't exceed 100"), while its card scores read the request as given.
    pub fn granted_cores(&self) -> i32 {
        self.cores.min(100)
    }
}

/// Everything HAMi reads of a pod that asks for cards, computed once per cycle.
#[derive(Debug, Clone)]
pub struct PodRequest {
    /// One entry per container, init containers first; `None` asks for no card.
    pub containers: SmallVec<[Option<CardRequest>; 2]>,
    pub init_containers: usize,
    pub gpu_policy: GpuPolicy,
    pub node_policy: NodePolicy,
    pub weights: Weights,
    pub numa_bind: bool,
    /// `nvidia.com/use-gputype` and `nouse-gputype`, upper-cased, blanks dropped.
    pub use_types: Vec<Box<str>>,
    pub nouse_types: Vec<Box<str>>,
    /// `nvidia.com/use-gpuuuid` (which wins) and `nouse-gpuuuid`.
    pub use_uuids: Option<Vec<Box<str>>>,
    pub nouse_uuids: Option<Vec<Box<str>>>,
    /// `nvidia.com/vgpu-mode`: the card's mode must be part of it.
    pub vgpu_mode: Option<Box<str>>,
    /// Asks for memory or compute shares, which only HAMi-registered nodes offer.
    pub needs_hami: bool,
}

struct Names {
    count: Sym,
    memory: Sym,
    percentage: Sym,
    cores: Sym,
}

static NAMES: LazyLock<Names> = LazyLock::new(|| Names {
    count: Sym::new(gpu::GPU_COUNT),
    memory: Sym::new(gpu::GPU_MEMORY),
    percentage: Sym::new(gpu::GPU_MEMORY_PERCENTAGE),
    cores: Sym::new(gpu::GPU_CORES),
});

/// Whether the pod names any of HAMi's NVIDIA resources: the quick test that leaves every
/// other pod to the rest of the scheduler.
pub fn asks_for_cards(pod: &Pod) -> bool {
    let n = &*NAMES;
    pod.containers.iter().chain(&pod.init_containers).any(|c| {
        [n.count, n.memory, n.percentage, n.cores]
            .iter()
            .any(|r| c.names_resource(*r))
    })
}

/// The pod's request, `Ok(None)` when no container asks for a card, `Err` with the
/// message HAMi's webhook or scheduler would reject it with.
pub fn pod_request(pod: &Pod, args: &GpuShare) -> Result<Option<PodRequest>, String> {
    let mut containers = SmallVec::new();
    let mut needs_hami = false;
    for container in pod.init_containers.iter().chain(&pod.containers) {
        let n = &*NAMES;
        needs_hami |= [n.memory, n.percentage, n.cores]
            .iter()
            .any(|r| container.names_resource(*r));
        containers.push(container_request(container, args)?);
    }
    if containers.iter().all(Option::is_none) {
        return Ok(None);
    }
    let gpu_policy = match pod.annotation(gpu::GPU_SCHEDULER_POLICY) {
        Some(p) if valid_gpu_policy(p) => p,
        _ => &args.gpu_scheduler_policy,
    };
    let numa_bind = pod
        .annotation(gpu::NUMA_BIND)
        .is_some_and(go_parse_bool_true);
    let weights = match pod.annotation(gpu::DEVICE_SCORING_WEIGHTS) {
        Some(value) => Weights::parse(value)?,
        None => Weights::default(),
    };
    let list = |key: &str| uuid_list(pod.annotation(key));
    let types = |key: &str| -> Vec<Box<str>> {
        pod.annotation(key)
            .into_iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| Box::from(t.to_uppercase()))
            .collect()
    };
    Ok(Some(PodRequest {
        containers,
        init_containers: pod.init_containers.len(),
        gpu_policy: GpuPolicy::new(gpu_policy, numa_bind),
        node_policy: pod
            .annotation(gpu::NODE_SCHEDULER_POLICY)
            .and_then(node_policy)
            .unwrap_or(args.node_scheduler_policy),
        weights,
        numa_bind,
        use_types: types(gpu::USE_GPU_TYPE),
        nouse_types: types(gpu::NOUSE_GPU_TYPE),
        use_uuids: list(gpu::USE_GPU_UUID),
        nouse_uuids: list(gpu::NOUSE_GPU_UUID),
        vgpu_mode: pod.annotation(gpu::VGPU_MODE).map(Box::from),
        needs_hami,
    }))
}

/// A use or no-use list of card UUIDs, as HAMi's `CheckUUID` reads it: entries trimmed,
/// and a value of nothing but spaces is no list at all.
pub(crate) fn uuid_list(value: Option<&str>) -> Option<Vec<Box<str>>> {
    value
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|u| Box::from(u.trim())).collect())
}

/// Go's `strconv.ParseBool` yielding true.
fn go_parse_bool_true(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// One container: HAMi's admission (validation, `mutateContainerResource`,
/// `defaultExclusiveCoreIfNeeded`), then `GenerateResourceRequests`.
fn container_request(c: &Container, args: &GpuShare) -> Result<Option<CardRequest>, String> {
    let n = &*NAMES;
    let named = |r: Sym| c.names_resource(r);
    let value = |r: Sym| c.requests.scalar(r);
    // `validateMemoryPercentage`; compute above 100 is admitted and clamped by Fit.
    if named(n.percentage) && !(0..=100).contains(&value(n.percentage)) {
        return Err(format!(
            "invalid {} value {} in container {}: must be an integer between 0 and 100",
            gpu::GPU_MEMORY_PERCENTAGE,
            value(n.percentage),
            c.name
        ));
    }
    let mut count = named(n.count).then(|| value(n.count));
    if count.is_none()
        && (named(n.cores) || named(n.memory) || named(n.percentage))
        && args.default_gpu_num > 0
    {
        count = Some(i64::from(args.default_gpu_num));
    }
    let Some(count) = count else {
        return Ok(None);
    };
    // A whole card asked for without compute gets all of it: exclusive.
    let exclusive = !named(n.cores)
        && if named(n.percentage) {
            value(n.percentage) == 100
        } else {
            !named(n.memory)
        };
    // HAMi reads both as int32. Its scheduler logs a memory request beyond that as
    // "rejecting to avoid silent under-allocation" and then places the container with no
    // card; refused here, naming the container and the value, so that no pod asking for
    // card memory lands without a card.
    let int32 = |name: &str, value: i64| {
        i32::try_from(value).map_err(|_| {
            format!(
                "invalid {name} value {value} in container {}: must be an integer between 0 and {}",
                c.name,
                i32::MAX
            )
        })
    };
    let nums = int32(gpu::GPU_COUNT, count)?;
    if nums <= 0 {
        return Ok(None);
    }
    let mut memory_mib = 0;
    if named(n.memory) {
        // Quantities are never negative (the API server refuses them).
        memory_mib = int32(gpu::GPU_MEMORY, value(n.memory))?.max(0);
    }
    let mut memory_percentage = NO_PERCENTAGE;
    if named(n.percentage) {
        let p = value(n.percentage);
        memory_percentage = if p > 100 {
            100
        } else if p > 0 {
            p as i32
        } else {
            NO_PERCENTAGE
        };
    }
    if memory_percentage == NO_PERCENTAGE && memory_mib == 0 {
        if args.default_memory != 0 {
            memory_mib = args.default_memory;
        } else {
            memory_percentage = 100;
        }
    }
    let cores = if exclusive {
        100
    } else if named(n.cores) {
        // Go's int32(corenums); quantities are never negative.
        value(n.cores) as i32
    } else {
        args.default_cores
    };
    Ok(Some(CardRequest {
        nums,
        memory_mib,
        memory_percentage,
        cores,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::Resources;

    fn container(resources: &[(&str, i64)]) -> Container {
        let mut c = Container::new("c", None, None);
        let mut zero = Vec::new();
        for (name, amount) in resources {
            if *amount == 0 {
                zero.push(Sym::new(name));
            }
            c.requests
                .set(gantry_api::ResourceName::parse(name), *amount);
        }
        c.zero_requests = zero.into_boxed_slice();
        c
    }

    fn request(resources: &[(&str, i64)]) -> Result<Option<CardRequest>, String> {
        container_request(&container(resources), &GpuShare::default())
    }

    fn want(nums: i32, memory_mib: i32, memory_percentage: i32, cores: i32) -> CardRequest {
        CardRequest {
            nums,
            memory_mib,
            memory_percentage,
            cores,
        }
    }

    const GPU: &str = gpu::GPU_COUNT;
    const MEM: &str = gpu::GPU_MEMORY;
    const PCT: &str = gpu::GPU_MEMORY_PERCENTAGE;
    const CORES: &str = gpu::GPU_CORES;

    #[test]
    fn requests_as_hamis_generate_resource_requests_reads_them() {
        // HAMi's TestGenerateResourceRequests, after the webhook's defaulting.
        // A count alone: all the memory, and (webhook) all the compute.
        assert_eq!(request(&[(GPU, 1)]), Ok(Some(want(1, 0, 100, 100))));
        assert_eq!(
            request(&[(GPU, 2), (MEM, 4096)]),
            Ok(Some(want(2, 4096, 101, 0)))
        );
        assert_eq!(request(&[(GPU, 1), (PCT, 50)]), Ok(Some(want(1, 0, 50, 0))));
        assert_eq!(
            request(&[(GPU, 1), (CORES, 0)]),
            Ok(Some(want(1, 0, 100, 0)))
        );
        assert_eq!(
            request(&[(GPU, 1), (CORES, 50)]),
            Ok(Some(want(1, 0, 100, 50)))
        );
        // A percentage of 0 is unset (whole memory) and not exclusive.
        assert_eq!(request(&[(GPU, 1), (PCT, 0)]), Ok(Some(want(1, 0, 100, 0))));
        assert_eq!(
            request(&[(GPU, 1), (MEM, 2000), (PCT, 0)]),
            Ok(Some(want(1, 2000, 101, 0)))
        );
        // 100% of the memory without compute: exclusive.
        assert_eq!(
            request(&[(GPU, 1), (PCT, 100)]),
            Ok(Some(want(1, 0, 100, 100)))
        );
        // No count, some memory: the webhook adds defaultGPUNum (1).
        assert_eq!(
            request(&[(MEM, 1024), (CORES, 10)]),
            Ok(Some(want(1, 1024, 101, 10)))
        );
        // Bytes-scale memory overflows int32: HAMi's scheduler drops the request (and the
        // pod would land with no card); refused here, naming the value. Zero cards ask
        // nothing.
        assert_eq!(
            request(&[(GPU, 1), (MEM, 16 << 30)]),
            Err("invalid nvidia.com/gpumem value 17179869184 in container c: must be an integer between 0 and 2147483647".into())
        );
        assert_eq!(
            request(&[(GPU, 1), (MEM, 2_147_483_647)]),
            Ok(Some(want(1, 2_147_483_647, 101, 0)))
        );
        assert_eq!(request(&[(GPU, 0)]), Ok(None));
        assert!(
            request(&[(GPU, 2_147_483_648)])
                .unwrap_err()
                .starts_with("invalid nvidia.com/gpu value 2147483648")
        );
        assert_eq!(request(&[("cpu-ish/thing", 1)]), Ok(None));
    }

    #[test]
    fn the_webhook_rejects_memory_shares_out_of_range_and_admits_any_compute() {
        // HAMi's Test_MutateAdmission_MemoryPercentageValidation; its webhook no longer
        // validates gpucores (Fit clamps it: TestFit "core limit can't exceed 100").
        for bad in [101, 150, -1] {
            let message = request(&[(GPU, 1), (PCT, bad)]).unwrap_err();
            assert!(
                message.contains("must be an integer between 0 and 100"),
                "{message}"
            );
        }
        let over = request(&[(GPU, 1), (CORES, 150)]).unwrap().unwrap();
        assert_eq!((over.cores, over.granted_cores()), (150, 100));
        assert!(request(&[(GPU, 1), (CORES, 100)]).is_ok());
        assert!(request(&[(GPU, 1), (PCT, 100)]).is_ok());
    }

    #[test]
    fn defaults_come_from_the_plugin_arguments() {
        let args = GpuShare {
            default_memory: 512,
            default_cores: 5,
            ..GpuShare::default()
        };
        // HAMi's TestGenerateResourceRequests_DefaultMemory.
        let c = container(&[(GPU, 1), (PCT, 30)]);
        assert_eq!(container_request(&c, &args), Ok(Some(want(1, 0, 30, 5))));
        let c = container(&[(GPU, 1), (PCT, 0)]);
        assert_eq!(container_request(&c, &args), Ok(Some(want(1, 512, 101, 5))));
        let none = GpuShare {
            default_gpu_num: 0,
            ..GpuShare::default()
        };
        assert_eq!(container_request(&container(&[(MEM, 10)]), &none), Ok(None));
    }

    #[test]
    fn pods_read_init_containers_first_and_their_annotations() {
        let mut pod = Pod::new("ns", "p")
            .with_container(container(&[(GPU, 1), (MEM, 100)]))
            .with_init_container(container(&[]));
        pod.annotations = [
            (gpu::USE_GPU_TYPE, "a100, ,h100"),
            (gpu::NOUSE_GPU_UUID, "GPU-1,GPU-2"),
            (gpu::NUMA_BIND, "True"),
            (gpu::NODE_SCHEDULER_POLICY, "spread"),
            (gpu::GPU_SCHEDULER_POLICY, "not-a-policy"),
        ]
        .iter()
        .map(|(k, v)| (std::sync::Arc::from(*k), std::sync::Arc::from(*v)))
        .collect();
        assert!(asks_for_cards(&pod));
        let r = pod_request(&pod, &GpuShare::default()).unwrap().unwrap();
        assert_eq!(r.containers.len(), 2);
        assert_eq!(r.containers[0], None);
        assert_eq!(r.init_containers, 1);
        assert_eq!(r.use_types, [Box::from("A100"), Box::from("H100")]);
        assert_eq!(r.nouse_uuids.as_ref().unwrap().len(), 2);
        assert!(r.numa_bind && r.needs_hami);
        assert_eq!(r.node_policy, NodePolicy::Spread);
        assert_eq!(
            r.gpu_policy,
            GpuPolicy::new("spread", true),
            "invalid: the default"
        );
        let plain = Pod::new("ns", "p").with_container(Container::new("c", Some(1), None));
        assert!(!asks_for_cards(&plain));
        let mut whole = Pod::new("ns", "w").with_container(container(&[(GPU, 2)]));
        assert!(
            !pod_request(&whole, &GpuShare::default())
                .unwrap()
                .unwrap()
                .needs_hami
        );
        whole.annotations = [(gpu::DEVICE_SCORING_WEIGHTS, "slot=1")]
            .iter()
            .map(|(k, v)| (std::sync::Arc::from(*k), std::sync::Arc::from(*v)))
            .collect();
        assert!(pod_request(&whole, &GpuShare::default()).is_err());
        let _ = Resources::default();
    }
}
