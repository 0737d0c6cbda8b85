//! CEL device selectors (DeviceClass and ResourceClaim `selectors[].cel.expression`):
//! any text compiled with upstream's limits, then evaluated against a device. Errors are
//! fine; a panic, a stack overflow, a hang or a blow-up is not.
#![no_main]

use std::sync::Arc;

use gantry_api::Sym;
use gantry_api::dra::{AttributeValue, Device, QualifiedName};
use gantry_framework::plugins::dynamic_resources::cel::Selector;
use libfuzzer_sys::fuzz_target;

fn device() -> Device {
    let name = |domain: &str, id: &str| QualifiedName {
        domain: Sym::new(domain),
        id: Sym::new(id),
    };
    Device {
        binding: None,
        binds_to_node: false,
        name: Sym::new("gpu-0"),
        attributes: vec![
            (
                name("gpu.example.com", "model"),
                AttributeValue::String(Arc::from("a100")),
            ),
            (name("gpu.example.com", "index"), AttributeValue::Int(0)),
            (name("example.com", "healthy"), AttributeValue::Bool(true)),
            (
                name("gpu.example.com", "driverVersion"),
                AttributeValue::Version(Arc::from("1.2.3")),
            ),
        ],
        capacity: vec![gantry_api::dra::DeviceCapacity::new(
            name("gpu.example.com", "memory"),
            "memory",
            40 * (1 << 30) * 1000,
        )],
        allow_multiple_allocations: false,
        taints: Vec::new(),
        consumes_counters: Vec::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(expression) = std::str::from_utf8(data)
        && let Ok(selector) = Selector::compile(expression)
    {
        let _ = selector.matches(Sym::new("gpu.example.com"), &device());
    }
});
