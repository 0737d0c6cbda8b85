//! Unit tests of the pod model: requests, usage, templates, conflicts.

use std::sync::Arc;

use crate::release::Release;
use crate::resources::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use crate::{ResourceName, Resources, Sym};

use super::*;

fn container(cpu: i64, mem: i64) -> Container {
    Container::new("c", Some(cpu), Some(mem))
}

fn sidecar(cpu: i64, mem: i64) -> Container {
    Container {
        restartable: true,
        ..container(cpu, mem)
    }
}

#[test]
fn requests_sum_containers_and_take_init_peak() {
    // Cases re-derived from component-helpers' TestPodResourceRequests.
    let pod = Pod::new("ns", "p")
        .with_container(container(100, 10))
        .with_container(container(200, 20))
        .with_init_container(container(250, 5));
    assert_eq!(pod.requests(), &Resources::new(300, 30));

    let pod = Pod::new("ns", "p")
        .with_container(container(100, 10))
        .with_init_container(container(500, 5));
    assert_eq!(pod.requests(), &Resources::new(500, 10));
}

#[test]
fn sidecars_add_to_containers_and_to_later_init_containers() {
    // init1 (sidecar 1 cpu), init2 (regular 2 cpu) runs while the sidecar runs: 3 cpu
    // peak; steady state: container 1 cpu + sidecar 1 cpu = 2 cpu.
    let pod = Pod::new("ns", "p")
        .with_init_container(sidecar(1000, 0))
        .with_init_container(container(2000, 0))
        .with_container(container(1000, 0));
    assert_eq!(pod.requests().milli_cpu, 3000);

    let pod = Pod::new("ns", "p")
        .with_init_container(container(2000, 0))
        .with_init_container(sidecar(1000, 0))
        .with_container(container(1000, 0));
    assert_eq!(pod.requests().milli_cpu, 2000);
}

#[test]
fn overhead_is_added() {
    let mut pod = Pod::new("ns", "p").with_container(container(100, 10));
    pod.overhead = Some(Box::new(Resources::new(50, 5)));
    pod.update_requests();
    assert_eq!(pod.requests(), &Resources::new(150, 15));
}

#[test]
fn non_zero_requests_default_missing_cpu_and_memory() {
    let pod = Pod::new("ns", "p")
        .with_container(Container::new("a", None, None))
        .with_container(Container::new("b", Some(0), Some(300)));
    assert_eq!(pod.requests(), &Resources::new(0, 300));
    assert_eq!(
        pod.non_zero_requests(),
        &Resources::new(DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST + 300)
    );
}

#[test]
fn a_copy_shares_the_template_and_a_write_copies_it() {
    let pod = Pod::new("ns", "p")
        .with_labels([("app", "web")])
        .with_requests(100, 10);
    let bound = pod.bound_to(Sym::new("n1"));
    assert!(
        bound.shares_template(&pod),
        "recording the node copies no spec"
    );
    assert_eq!(bound.node_name, Some(Sym::new("n1")));
    assert_eq!(pod.node_name, None);
    let mut edited = bound.clone();
    edited.priority = 7;
    assert!(
        !edited.shares_template(&pod),
        "a write gets a template of its own"
    );
    assert_eq!((pod.priority, bound.priority, edited.priority), (0, 0, 7));
    assert_eq!(edited.requests(), pod.requests());
}

#[test]
fn replicas_share_the_template_and_equal_templates_can_be_shared() {
    let pod = Pod::new("ns", "web-0")
        .with_labels([("app", "web")])
        .with_requests(100, 10)
        .on_node("n1");
    let replica = pod.replica("web-1");
    assert!(replica.shares_template(&pod));
    assert_eq!(
        (&*replica.name, &*replica.uid, replica.node_name),
        ("web-1", "ns/web-1", pod.node_name)
    );

    let mut decoded_apart = Pod::new("ns", "web-2")
        .with_labels([("app", "web")])
        .with_requests(100, 10);
    assert!(!decoded_apart.shares_template(&pod));
    assert!(decoded_apart.share_template_of(&pod));
    assert!(decoded_apart.shares_template(&pod));
    let mut different = Pod::new("ns", "db-0").with_requests(100, 10);
    assert!(!different.share_template_of(&pod), "labels differ");
}

#[test]
fn disks_conflict_as_upstream_is_volume_conflict_says() {
    let gce = |name: &str, read_only| Disk::GcePersistentDisk {
        pd_name: Arc::from(name),
        read_only,
    };
    assert!(gce("foo", false).conflicts(&gce("foo", false)));
    assert!(gce("foo", true).conflicts(&gce("foo", false)));
    assert!(
        !gce("foo", true).conflicts(&gce("foo", true)),
        "all read-only"
    );
    assert!(!gce("foo", false).conflicts(&gce("bar", false)));
    let ebs = |id: &str| Disk::AwsElasticBlockStore {
        volume_id: Arc::from(id),
    };
    assert!(ebs("foo").conflicts(&ebs("foo")));
    assert!(!ebs("foo").conflicts(&ebs("bar")));
    assert!(!ebs("foo").conflicts(&gce("foo", false)), "different kinds");
    let iscsi = |iqn: &str, read_only| Disk::Iscsi {
        iqn: Arc::from(iqn),
        read_only,
    };
    let target = "iqn.2016-12.server:storage.target01";
    assert!(iscsi(target, false).conflicts(&iscsi(target, true)));
    assert!(!iscsi(target, true).conflicts(&iscsi(target, true)));
    assert!(!iscsi(target, false).conflicts(&iscsi("iqn.2016-12.server:storage.target02", false)));
    let rbd = |monitors: &[&str], image: &str, read_only| Disk::Rbd {
        monitors: monitors.iter().map(|m| Arc::from(*m)).collect(),
        pool: Arc::from("foo"),
        image: Arc::from(image),
        read_only,
    };
    assert!(rbd(&["a", "b"], "bar", false).conflicts(&rbd(&["b", "c"], "bar", false)));
    assert!(!rbd(&["a", "b"], "bar", false).conflicts(&rbd(&["c", "d"], "bar", false)));
    assert!(!rbd(&["a"], "bar", false).conflicts(&rbd(&["a"], "baz", false)));
    assert!(!rbd(&["a"], "bar", true).conflicts(&rbd(&["a"], "bar", true)));
}

const MI: i64 = 1024 * 1024;

fn with_pod_level(mut pod: Pod, named: &[(ResourceName, i64)]) -> Pod {
    let mut requests = Resources::default();
    for &(resource, amount) in named {
        requests.set(resource, amount);
    }
    pod.pod_level = Some(Box::new(PodLevelRequests {
        requests,
        named: named.iter().map(|(r, _)| *r).collect(),
    }));
    pod.update_requests();
    pod
}

fn unset() -> Container {
    Container::new("c", None, None)
}

#[test]
fn pod_level_requests_replace_the_containers_aggregate() {
    use ResourceName::{Cpu, Memory};
    // Rows of component-helpers/resource/helpers_test.go TestPodLevelResourceRequests
    // (cpu in millicores, memory in Mi): pod-level, containers, init containers
    // (sidecar when flagged), expected PodRequests.
    type Row = (
        &'static str,
        &'static [(ResourceName, i64)],
        &'static [(i64, i64)],
        &'static [(i64, i64, bool)],
        (i64, i64),
    );
    let rows: &[Row] = &[
        ("pod level memory", &[(Memory, 2)], &[], &[], (0, 2)),
        (
            "pod level memory and container level cpu",
            &[(Memory, 2)],
            &[(2, 0)],
            &[],
            (2, 2),
        ),
        ("only container level", &[], &[(2, 3)], &[], (2, 3)),
        (
            "both levels",
            &[(Cpu, 8), (Memory, 6)],
            &[(2, 3)],
            &[],
            (8, 6),
        ),
        (
            "container and init container",
            &[],
            &[(2, 3)],
            &[(4, 5, false)],
            (4, 5),
        ),
        (
            "container and sidecar",
            &[],
            &[(2, 3)],
            &[(4, 5, true)],
            (6, 8),
        ),
        (
            "container, sidecar and init",
            &[],
            &[(2, 3)],
            &[(4, 5, true), (8, 6, false)],
            (12, 11),
        ),
        (
            "pod level over container, sidecar and init",
            &[(Cpu, 18), (Memory, 15)],
            &[(2, 3)],
            &[(4, 5, true), (8, 6, false)],
            (18, 15),
        ),
    ];
    for (name, pod_level, containers, init, (cpu, memory)) in rows {
        let mut pod = Pod::new("ns", "p");
        for &(c, m) in *containers {
            pod = pod.with_container(container(c, m * MI));
        }
        for &(c, m, sidecar) in *init {
            let mut ic = container(c, m * MI);
            ic.restartable = sidecar;
            pod = pod.with_init_container(ic);
        }
        let levels: Vec<_> = pod_level
            .iter()
            .map(|&(r, a)| (r, if r == Memory { a * MI } else { a }))
            .collect();
        let pod = if levels.is_empty() {
            pod
        } else {
            with_pod_level(pod, &levels)
        };
        assert_eq!(
            (pod.requests().milli_cpu, pod.requests().memory),
            (*cpu, memory * MI),
            "{name}"
        );
        assert_eq!(pod.usage(), pod.requests(), "{name}: nothing resized");
    }
}

#[test]
fn overhead_is_added_after_pod_level_requests() {
    // TestPodRequestsAndLimits "req-and-overhead", then the same with the cpu set at
    // pod level: the pod-level request replaces the aggregate, overhead comes on top.
    let mut pod = Pod::new("ns", "p").with_container(container(1000, 10));
    pod.overhead = Some(Box::new(Resources::new(5000, 5)));
    pod.update_requests();
    assert_eq!(pod.requests(), &Resources::new(6000, 15));
    let pod = with_pod_level(pod, &[(ResourceName::Cpu, 3000)]);
    assert_eq!(pod.requests(), &Resources::new(8000, 15));
}

#[test]
fn bound_pods_non_zero_requests_with_pod_level_requests() {
    use ResourceName::{Cpu, EphemeralStorage, Memory};
    let (cpu, memory) = (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST);
    // Rows of pkg/scheduler/framework/types_test.go TestPodInfoCalculateResources:
    // (usage cpu, memory), (non-zero cpu, memory).
    let requestless = Pod::new("ns", "p").with_container(unset());
    assert_eq!(requestless.usage(), &Resources::default());
    assert_eq!(requestless.non_zero_usage(), &Resources::new(cpu, memory));

    let both = with_pod_level(
        Pod::new("ns", "p")
            .with_init_container(container(500, 500 * MI))
            .with_container(container(500, 500 * MI)),
        &[(Cpu, 1200), (Memory, 1200 * MI)],
    );
    assert_eq!(both.usage(), &Resources::new(1200, 1200 * MI));
    assert_eq!(both.non_zero_usage(), &Resources::new(1200, 1200 * MI));

    let mut sidecar = container(500, 500 * MI);
    sidecar.restartable = true;
    let with_sidecar = with_pod_level(
        Pod::new("ns", "p")
            .with_init_container(sidecar)
            .with_container(container(500, 500 * MI)),
        &[(Cpu, 1200), (Memory, 1200 * MI)],
    );
    assert_eq!(
        with_sidecar.non_zero_usage(),
        &Resources::new(1200, 1200 * MI)
    );

    let memory_only = with_pod_level(
        Pod::new("ns", "p")
            .with_init_container(unset())
            .with_container(unset()),
        &[(Memory, 1200 * MI)],
    );
    assert_eq!(memory_only.usage(), &Resources::new(0, 1200 * MI));
    assert_eq!(
        memory_only.non_zero_usage(),
        &Resources::new(cpu, 1200 * MI)
    );

    let cpu_only = with_pod_level(
        Pod::new("ns", "p")
            .with_init_container(unset())
            .with_container(unset()),
        &[(Cpu, 500)],
    );
    assert_eq!(cpu_only.non_zero_usage(), &Resources::new(500, memory));

    let storage = |amount| {
        let mut c = unset();
        c.requests.set(EphemeralStorage, amount);
        c
    };
    let unsupported = with_pod_level(
        Pod::new("ns", "p")
            .with_init_container(storage(500 * MI))
            .with_container(storage(800 * MI)),
        &[(Cpu, 500)],
    );
    let mut usage = Resources::new(500, 0);
    usage.ephemeral_storage = 800 * MI;
    assert_eq!(unsupported.usage(), &usage);
    assert_eq!(unsupported.non_zero_usage(), &Resources::new(500, memory));
}

#[test]
fn defaults_fill_only_what_is_missing_at_every_level() {
    // getNonMissingContainerRequests: one container names memory, so no container's
    // missing memory is defaulted on the node's side; the pod being scored
    // (calculatePodResourceRequest in Fit's scorer, which skips pod-level requests)
    // defaults each container's missing cpu and memory.
    let pod = with_pod_level(
        Pod::new("ns", "p")
            .with_container(Container::new("a", None, Some(300 * MI)))
            .with_container(unset()),
        &[(ResourceName::Cpu, 700)],
    );
    assert_eq!(pod.non_zero_usage(), &Resources::new(700, 300 * MI));
    assert_eq!(
        pod.non_zero_requests(),
        &Resources::new(
            2 * DEFAULT_MILLI_CPU_REQUEST,
            300 * MI + DEFAULT_MEMORY_REQUEST
        )
    );
    // Without pod-level requests both default per container.
    let pod = Pod::new("ns", "p")
        .with_container(Container::new("a", None, Some(300 * MI)))
        .with_container(unset());
    let both = Resources::new(
        2 * DEFAULT_MILLI_CPU_REQUEST,
        300 * MI + DEFAULT_MEMORY_REQUEST,
    );
    assert_eq!(
        (pod.non_zero_usage(), pod.non_zero_requests()),
        (&both, &both)
    );
}

#[test]
fn a_resized_container_counts_in_usage_only() {
    let mut c = container(1000, 100 * MI);
    c.resized = Some(Box::new(ContainerRequests {
        requests: Resources::new(3000, 100 * MI),
        cpu_unset: false,
        memory_unset: false,
    }));
    let pod = Pod::new("ns", "p").with_container(c);
    assert_eq!(pod.requests(), &Resources::new(1000, 100 * MI));
    assert_eq!(pod.usage(), &Resources::new(3000, 100 * MI));
    assert_eq!(pod.non_zero_usage(), &Resources::new(3000, 100 * MI));
    assert_eq!(pod.non_zero_requests(), &Resources::new(1000, 100 * MI));
}

#[test]
fn before_v1_32_the_node_counts_defaulted_requests_without_adding_sidecars() {
    // calculateResource at release-1.31: GetNonzeroRequests on each list PodRequests
    // hands to ContainerFn; sidecars are not added to the regular containers' sum.
    let (cpu, memory) = (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST);
    let mut sidecar = unset();
    sidecar.restartable = true;
    let build = |rules: PodRules, init: Vec<Container>, overhead: Option<Resources>| {
        let mut pod = Pod::new("ns", "p").with_container(unset());
        pod.rules = rules;
        pod.init_containers = init;
        pod.overhead = overhead.map(Box::new);
        pod.update_requests();
        pod
    };
    let v131 = PodRules::of(Release::at(31));
    let v132 = PodRules::of(Release::at(32));
    // A requestless sidecar and container: max(100m, 100m) against 100m + 100m.
    let old = build(v131, vec![sidecar.clone()], None);
    let new = build(v132, vec![sidecar.clone()], None);
    assert_eq!(old.non_zero_usage(), &Resources::new(cpu, memory));
    assert_eq!(new.non_zero_usage(), &Resources::new(2 * cpu, 2 * memory));
    assert_eq!(
        old.non_zero_requests(),
        new.non_zero_requests(),
        "the pod being scored counts sidecars in both"
    );
    // Sidecar 1 cpu, init 2 cpu (started after it), container: the init container
    // sees 3 cpu; memory named by none, so each list defaults to 200Mi once.
    let mut one_cpu_sidecar = Container::new("s", Some(1000), None);
    one_cpu_sidecar.restartable = true;
    let init = vec![one_cpu_sidecar, Container::new("i", Some(2000), None)];
    let old = build(v131, init.clone(), None);
    let new = build(v132, init, None);
    assert_eq!(old.non_zero_usage(), &Resources::new(3000, memory));
    assert_eq!(new.non_zero_usage(), &Resources::new(3000, 2 * memory));
    // Two sidecars: the second one's list is the running sum (1.5 cpu), not its own.
    let mut second = Container::new("t", Some(500), None);
    second.restartable = true;
    let mut first = Container::new("s", Some(1000), None);
    first.restartable = true;
    let old = build(v131, vec![first, second], None);
    assert_eq!(old.non_zero_usage().milli_cpu, 1500);
    // Overhead is added to the old rule's result.
    let old = build(v131, vec![sidecar], Some(Resources::new(50, 5)));
    assert_eq!(old.non_zero_usage(), &Resources::new(cpu + 50, memory + 5));
}

#[test]
fn sidecar_host_ports_count_from_v1_34() {
    // util.GetHostPorts: restartable init containers' ports first, then containers';
    // a regular init container's never.
    let port = |port| HostPort {
        ip: HostPort::any_ip(),
        protocol: Protocol::Tcp,
        port,
    };
    let with_port = |mut c: Container, p, restartable| {
        c.host_ports.push(port(p));
        c.restartable = restartable;
        c
    };
    let build = |rules: PodRules| {
        let mut pod = Pod::new("ns", "p")
            .with_container(with_port(unset(), 80, false))
            .with_init_container(with_port(unset(), 8080, true))
            .with_init_container(with_port(unset(), 9090, false));
        pod.rules = rules;
        pod
    };
    let ports = |pod: &Pod| pod.host_ports().map(|p| p.port).collect::<Vec<_>>();
    assert_eq!(ports(&build(PodRules::of(Release::at(34)))), [8080, 80]);
    assert_eq!(ports(&build(PodRules::default())), [8080, 80]);
    assert_eq!(ports(&build(PodRules::of(Release::at(33)))), [80]);
}

#[test]
fn host_port_conflicts() {
    let any = HostPort::any_ip();
    let ip1 = Sym::new("10.0.0.1");
    let ip2 = Sym::new("10.0.0.2");
    let p = |ip, protocol, port| HostPort { ip, protocol, port };
    assert!(p(any, Protocol::Tcp, 80).conflicts(&p(ip1, Protocol::Tcp, 80)));
    assert!(p(ip1, Protocol::Tcp, 80).conflicts(&p(ip1, Protocol::Tcp, 80)));
    assert!(!p(ip1, Protocol::Tcp, 80).conflicts(&p(ip2, Protocol::Tcp, 80)));
    assert!(!p(any, Protocol::Tcp, 80).conflicts(&p(any, Protocol::Udp, 80)));
    assert!(!p(any, Protocol::Tcp, 80).conflicts(&p(any, Protocol::Tcp, 81)));
}
