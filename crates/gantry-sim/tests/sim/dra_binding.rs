//! Binding conditions (DRADeviceBindingConditions, beta and on from v1.36) against real
//! kube-scheduler v1.36.3 (`testdata/dra-1.36/binding-conditions`, see its README,
//! recorded with an emulated driver that sets a device's conditions once it is
//! allocated): pools with binding conditions are tried after the others, a device that
//! binds to the node keeps its allocation there, and PreBind waits for the driver (five
//! seconds: its first look after the immediate one).

use std::time::Duration;

use gantry_api::Release;
use gantry_sim::driver_binding::DriverBinding;
use gantry_sim::{SimOptions, Simulation};

use crate::step_corpus;

#[test]
fn devices_that_wait_for_their_driver_are_bound_as_v1_36_binds_them() {
    let want = step_corpus::recorded("dra-1.36", "binding-conditions", "expected.jsonl");
    let want_claims = step_corpus::recorded_lines("dra-1.36", "binding-conditions", "claims.jsonl");
    assert_eq!((want.len(), want_claims.len()), (3, 2));
    for release in ["1.36", "1.37"] {
        let release = Release::parse(Some(release), None).unwrap();
        let (got, claims) =
            step_corpus::decide_steps_and_claims("dra-1.36", "binding-conditions", release);
        assert_eq!(got, want, "{release}");
        assert_eq!(claims, want_claims, "{release}");
    }
}

/// p2 (created at 2 s) is bound when PreBind's second look finds the condition True:
/// 7,031 ms in the recording (`binds.jsonl`); the simulation adds only its bind latency.
#[test]
fn the_binding_waits_for_prebinds_second_look() {
    let release = Release::parse(Some("1.36"), None).unwrap();
    let sim = step_corpus::run_steps("dra-1.36", "binding-conditions", release);
    let bound: Vec<Option<Duration>> = sim.histories().iter().map(|h| h.bound).collect();
    let p2 = bound[1].expect("p2 is bound");
    assert!(
        p2 >= Duration::from_secs(7) && p2 < Duration::from_millis(7100),
        "{bound:?}"
    );
    assert!(bound[0].expect("p1 is bound") < Duration::from_millis(100));
}

/// The recording's FailedScheduling note for the failed binding, and its reason at the
/// end, with Gantry's claim name (its `generateName` suffix) and Gantry's prefix for a
/// failed binding cycle.
fn recorded_failure(name: &str, claim: &str) -> (String, String) {
    let events = step_corpus::recorded_lines("dra-1.36", name, "events.jsonl");
    let note = (events.iter())
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|e| e["reason"] == "FailedScheduling")
        .expect("a FailedScheduling event")["note"]
        .as_str()
        .unwrap()
        .replace("claim=p1-gpu", &format!("claim={claim}"));
    let last = step_corpus::recorded("dra-1.36", name, "expected.jsonl")[0].clone();
    (format!("binding rejected: {note}"), last.2.unwrap())
}

/// The one pod's reason at `t` seconds, with its claim's name.
fn reason_at(sim: &mut Simulation, t: f64) -> (Option<String>, String) {
    sim.run_until(Duration::from_secs_f64(t)).unwrap();
    let claim = (sim.cache().dra().claims().into_iter())
        .map(|c| c.name.to_string())
        .next()
        .expect("the pod's claim");
    (sim.placements()[0].reason.clone(), claim)
}

/// A driver that fails the binding (`-driver-binding fail`): PreBind fails with the
/// failure condition's reason and message, as v1.36.3 words it, five seconds in; the next
/// attempt finds the claim unusable and frees it; the pod never lands. After the second
/// allocation the driver has failed it again, as in the recording's last state.
#[test]
fn a_binding_the_driver_fails_is_given_back_and_retried_as_v1_36_does() {
    let release = Release::parse(Some("1.36"), None).unwrap();
    let options = SimOptions {
        driver_binding: DriverBinding::Fails { after: 0 },
        ..SimOptions::default()
    };
    let mut sim = step_corpus::start_steps("dra-1.36", "binding-failure", release, options);
    assert_eq!(reason_at(&mut sim, 4.9).0, None, "still waiting");
    let (reason, claim) = reason_at(&mut sim, 5.5);
    let (failed, freed) = recorded_failure("binding-failure", &claim);
    assert_eq!(reason.as_deref(), Some(&*failed));
    assert_eq!(reason_at(&mut sim, 9.0).0.as_deref(), Some(&*freed));
    sim.run_until(Duration::from_secs(11)).unwrap();
    let want = step_corpus::recorded_lines("dra-1.36", "binding-failure", "claims.jsonl");
    let got = step_corpus::claim_lines(&sim, "dra-1.36", "binding-failure", release);
    assert_eq!(got, want);
}

/// A driver that never answers, and a profile that waits 10 s (`config.yaml`): PreBind
/// times out with v1.36.3's words (the look at the deadline finds the claim past its
/// timeout), and the next attempt frees the claim.
#[test]
fn a_binding_nobody_answers_times_out_as_v1_36_times_it_out() {
    let release = Release::parse(Some("1.36"), None).unwrap();
    let options = SimOptions {
        driver_binding: DriverBinding::Never,
        ..SimOptions::default()
    };
    let mut sim = step_corpus::start_steps("dra-1.36", "binding-timeout", release, options);
    assert_eq!(reason_at(&mut sim, 9.9).0, None, "still waiting");
    let (reason, claim) = reason_at(&mut sim, 10.5);
    let (timed_out, freed) = recorded_failure("binding-timeout", &claim);
    assert_eq!(reason.as_deref(), Some(&*timed_out));
    assert_eq!(reason_at(&mut sim, 14.0).0.as_deref(), Some(&*freed));
    // Every later attempt ends the same way, until the pod is given up.
    let summary = sim.run().unwrap();
    sim.check_invariants().unwrap();
    assert_eq!(summary.gave_up, 1);
}

/// A claim allocated before its pod's binding (an earlier attempt's allocation, here at
/// time 0) times out at its own allocation time plus the timeout: PreBind's first look
/// past that ends the wait (upstream's `isPodReadyForBinding`), not the full timeout
/// counted from the binding's start. Timeout 10 s (`binding-timeout/config.yaml`), the pod
/// created at 7 s: Filter still takes the claim (0 + 10 is not before 7), PreBind starts
/// just after 7 s and its look at 12 s finds the claim past 10 s.
#[test]
fn a_claim_allocated_earlier_times_out_at_its_own_time() {
    use std::sync::Arc;

    use gantry_api::decode::ClusterObjects;
    use gantry_sim::SimEvent;

    let release = Release::parse(Some("1.36"), None).unwrap();
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/dra-1.36/binding-timeout"
    );
    let read = |file: &str| std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
    let mut cluster = ClusterObjects::for_release(release);
    cluster
        .decode_more(&read("cluster.yaml"), "cluster.yaml")
        .unwrap();
    let claim = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
status:
  allocation:
    allocationTimestamp: "1970-01-01T00:00:00Z"
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: a-fabric, device: fabric-0,
                 bindingConditions: [example.com/attached], bindingFailureConditions: [example.com/attach-failed]}]
"#;
    cluster.decode_more(claim, "claim.yaml").unwrap();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: p-uid}\nspec:\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n  resourceClaims: [{name: gpu, resourceClaimName: c}]\n";
    let pod = ClusterObjects::decode(pod, "pod.yaml")
        .unwrap()
        .pods
        .remove(0);
    let config = gantry_framework::config::SchedulerConfig::parse_for(
        &read("config.yaml"),
        "config.yaml",
        release,
    )
    .unwrap();
    let options = SimOptions {
        driver_binding: DriverBinding::Never,
        ..SimOptions::default()
    };
    let mut sim = Simulation::new(cluster, config.profiles, options).unwrap();
    sim.schedule(Duration::from_secs(7), SimEvent::CreatePod(Arc::new(pod)));
    sim.run_until(Duration::from_secs_f64(11.9)).unwrap();
    assert_eq!(sim.placements()[0].reason, None, "still waiting at 11.9 s");
    sim.run_until(Duration::from_secs_f64(12.5)).unwrap();
    assert_eq!(
        sim.placements()[0].reason.as_deref(),
        Some(
            "binding rejected: running PreBind plugin \"DynamicResources\": device binding timeout: claim=c"
        )
    );
}
