//! `nodeGroups[].gpus`: shareable NVIDIA cards on every node of a group, written as the
//! annotation HAMi's device plugin puts on its node (`hami.io/node-nvidia-register`), and
//! the `nvidia.com/gpu` it reports allocatable (cards × shares).
//!
//! ```yaml
//! gpus: {count: 8, memory: 80Gi, cores: 100, type: NVIDIA-A100-SXM4-80GB, split: 10, numa: 2}
//! ```

use gantry_api::Quantity;
use serde::Deserialize;
use serde_json::{Value, json};

const MIB: i64 = 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct GpuSpec {
    /// Cards per node.
    count: u32,
    /// Memory per card: MiB as a number, or a quantity (`80Gi`).
    memory: Value,
    /// Compute per card, 100 for a whole card.
    #[serde(default = "whole_card")]
    cores: i32,
    #[serde(rename = "type", default = "default_type")]
    card_type: String,
    /// Pods that may share a card (HAMi's `deviceSplitCount`).
    #[serde(default = "default_split")]
    split: u32,
    /// NUMA nodes the cards are spread over, in equal consecutive blocks.
    #[serde(default = "one")]
    numa: u32,
}

fn whole_card() -> i32 {
    100
}

fn default_type() -> String {
    "NVIDIA-A100".into()
}

fn default_split() -> u32 {
    10
}

fn one() -> u32 {
    1
}

/// The generated annotation and allocatable count, or the field (below `gpus`) and why.
pub(super) struct Registered {
    pub annotation: String,
    pub shares: u64,
}

impl GpuSpec {
    pub(super) fn register(&self, node: &str) -> Result<Registered, (&'static str, String)> {
        if self.count == 0 || self.count > 64 {
            return Err(("count", format!("must be 1 to 64, not {}", self.count)));
        }
        if !(1..=1000).contains(&self.split) {
            return Err(("split", format!("must be 1 to 1000, not {}", self.split)));
        }
        if !(1..=100).contains(&self.cores) {
            return Err(("cores", format!("must be 1 to 100, not {}", self.cores)));
        }
        if self.numa == 0 || self.numa > self.count {
            return Err((
                "numa",
                format!("must be 1 to count ({}), not {}", self.count, self.numa),
            ));
        }
        if !self.card_type.to_lowercase().contains("nvidia") {
            return Err((
                "type",
                format!(
                    "{:?} must name NVIDIA: HAMi ignores other cards",
                    self.card_type
                ),
            ));
        }
        let memory_mib = self.memory_mib().map_err(|m| ("memory", m))?;
        let cards: Vec<Value> = (0..self.count)
            .map(|i| {
                json!({
                    "id": format!("GPU-{node}-{i}"),
                    "index": i,
                    "count": self.split,
                    "devmem": memory_mib,
                    "devcore": self.cores,
                    "type": self.card_type,
                    "numa": i * self.numa / self.count,
                    "mode": "hami-core",
                    "health": true,
                })
            })
            .collect();
        Ok(Registered {
            annotation: Value::Array(cards).to_string(),
            shares: u64::from(self.count) * u64::from(self.split),
        })
    }

    fn memory_mib(&self) -> Result<i32, String> {
        let mib = match &self.memory {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => Quantity::parse(s)
                .ok()
                .and_then(|q| q.value().ok())
                .map(|bytes| bytes / MIB),
            _ => None,
        };
        mib.and_then(|m| i32::try_from(m).ok())
            .filter(|m| *m > 0)
            .ok_or_else(|| {
                format!(
                    "{} is not a card memory (MiB as a number, or a quantity like 80Gi)",
                    self.memory
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> GpuSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn cards_are_registered_as_hamis_device_plugin_writes_them() {
        let r = spec("{count: 4, memory: 80Gi, type: NVIDIA-H100, split: 5, numa: 2}")
            .register("n-1")
            .unwrap();
        assert_eq!(r.shares, 20);
        let annotations = [(
            std::sync::Arc::from(gantry_api::gpu::REGISTER_ANNOTATION),
            std::sync::Arc::from(r.annotation.as_str()),
        )];
        let devices = gantry_api::gpu::parse_node_devices(&annotations)
            .unwrap()
            .unwrap();
        let numa: Vec<i32> = devices.cards.iter().map(|c| c.numa).collect();
        assert_eq!(numa, [0, 0, 1, 1]);
        let c = &devices.cards[3];
        assert_eq!(
            (&*c.id, c.count, c.memory_mib, c.cores, c.health),
            ("GPU-n-1-3", 5, 81920, 100, true)
        );
        assert_eq!(
            spec("{count: 1, memory: 16384}")
                .register("n")
                .unwrap()
                .shares,
            10
        );
    }

    #[test]
    fn bad_specs_name_the_field() {
        for (yaml, field) in [
            ("{count: 0, memory: 1Gi}", "count"),
            ("{count: 1, memory: lots}", "memory"),
            ("{count: 1, memory: 0}", "memory"),
            ("{count: 1, memory: 1Gi, split: 0}", "split"),
            ("{count: 2, memory: 1Gi, numa: 3}", "numa"),
            ("{count: 1, memory: 1Gi, cores: 0}", "cores"),
            ("{count: 1, memory: 1Gi, type: MLU370}", "type"),
        ] {
            assert_eq!(
                spec(yaml).register("n").err().map(|e| e.0),
                Some(field),
                "{yaml}"
            );
        }
    }
}
