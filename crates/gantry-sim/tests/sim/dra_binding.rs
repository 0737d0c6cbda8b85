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
