//! SchedulingGates: a pod with scheduling gates is held back from the queue until they are
//! all removed.

use gantry_api::Pod;

use crate::{Plugin, PreEnqueuePlugin, Status};

pub const NAME: &str = "SchedulingGates";

pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> &'static [crate::ClusterEvent] {
        crate::events::UNSCHEDULED_POD_UPDATE
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &Pod, _cluster: &crate::PreEnqueueView<'_>) -> Status {
        if pod.scheduling_gates.is_empty() {
            return Status::success();
        }
        let names: Vec<&str> = pod.scheduling_gates.iter().map(|g| &**g).collect();
        Status::unresolvable(format!(
            "waiting for scheduling gates: [{}]",
            names.join(" ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Code, PreEnqueueView};

    #[test]
    fn gated_pods_wait() {
        let mut pod = Pod::new("ns", "p");
        assert!(
            SchedulingGates
                .pre_enqueue(&pod, &PreEnqueueView::of_groups(&Default::default()))
                .is_success()
        );
        pod.scheduling_gates = vec!["foo".into(), "bar".into()];
        let status =
            SchedulingGates.pre_enqueue(&pod, &PreEnqueueView::of_groups(&Default::default()));
        assert_eq!(status.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(status.message(), "waiting for scheduling gates: [foo bar]");
    }
}
