//! Device selectors: CEL expressions over `device.driver`, `device.attributes[domain][id]`
//! and `device.capacity[domain][id]`, evaluated with the `cel` crate.
//!
//! Attributes without a domain are listed under the driver's name, as upstream's CEL
//! environment does. Capacities are numbers in thousandths of their unit; `quantity("1Gi")`
//! converts a quantity string the same way, so that upstream's
//! `device.capacity[d].memory.compareTo(quantity("1Gi")) >= 0` reads as written (as do
//! `isGreaterThan`, `isLessThan` and `asInteger`). Version attributes are strings;
//! `semver()` is not provided, and an expression that calls it fails with CEL's error.

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map};
use cel::{Context, ExecutionError, Program, Value};
use gantry_api::dra::{AttributeValue, Device};
use gantry_api::{Quantity, Sym};

/// A compiled selector, shared between the pods that use the same expression.
pub struct Selector {
    program: Program,
}

impl Selector {
    /// Compiles the expression; the error is CEL's parse error, as one line.
    pub fn compile(expression: &str) -> Result<Selector, String> {
        Program::compile(expression)
            .map(|program| Selector { program })
            .map_err(|e| e.to_string().replace('\n', " "))
    }

    /// Whether the device satisfies the expression. A result that is not a boolean, or
    /// a failed evaluation (a missing attribute, say), is an error.
    pub fn matches(&self, driver: Sym, device: &Device) -> Result<bool, String> {
        ROOT.with(|root| {
            let mut scope = root.new_inner_scope();
            scope.add_variable_from_value("device", device_value(driver, device));
            match self.program.execute(&scope) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!("expression returned {other:?}, not a boolean")),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

thread_local! {
    /// The standard environment plus the quantity functions, built once per thread.
    static ROOT: Context<'static, 'static> = root_context();
}

fn root_context() -> Context<'static, 'static> {
    use cel::extractors::This;
    let mut context = Context::default();
    let declare = |result: Result<(), cel::DeclarationError>| {
        result.expect("the quantity functions do not clash with CEL's standard library")
    };
    declare(context.add_function("quantity", |text: Arc<String>| {
        Quantity::parse(&text)
            .and_then(|q| q.milli_value())
            .map_err(|e| ExecutionError::function_error("quantity", e.to_string()))
    }));
    declare(context.add_function("compareTo", |This(a): This<i64>, b: i64| a.cmp(&b) as i64));
    declare(context.add_function("isGreaterThan", |This(a): This<i64>, b: i64| a > b));
    declare(context.add_function("isLessThan", |This(a): This<i64>, b: i64| a < b));
    declare(context.add_function("asInteger", |This(a): This<i64>| a / 1000));
    context
}

fn device_value(driver: Sym, device: &Device) -> Value {
    let mut attributes: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    for (name, value) in &device.attributes {
        let value = match value {
            AttributeValue::Int(i) => Value::Int(*i),
            AttributeValue::Bool(b) => Value::Bool(*b),
            AttributeValue::String(s) | AttributeValue::Version(s) => Value::from(&**s),
        };
        attributes
            .entry(key(name.domain))
            .or_default()
            .insert(key(name.id), value);
    }
    let mut capacity: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    for (name, milli) in &device.capacity {
        capacity
            .entry(key(name.domain))
            .or_default()
            .insert(key(name.id), Value::Int(*milli));
    }
    let nested = |map: HashMap<Key, HashMap<Key, Value>>| -> Value {
        Value::Map(Map::from(
            map.into_iter()
                .map(|(k, v)| (k, Value::Map(Map::from(v))))
                .collect::<HashMap<Key, Value>>(),
        ))
    };
    let mut root: HashMap<Key, Value> = HashMap::new();
    root.insert(key_str("driver"), Value::from(driver.as_str()));
    root.insert(key_str("attributes"), nested(attributes));
    root.insert(key_str("capacity"), nested(capacity));
    Value::Map(Map::from(root))
}

fn key(s: Sym) -> Key {
    key_str(s.as_str())
}

fn key_str(s: &str) -> Key {
    Key::String(Arc::new(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::dra::QualifiedName;

    fn gpu() -> Device {
        let name = |domain: &str, id: &str| QualifiedName {
            domain: Sym::new(domain),
            id: Sym::new(id),
        };
        Device {
            name: Sym::new("gpu-0"),
            attributes: vec![
                (
                    name("gpu.example.com", "model"),
                    AttributeValue::String("a100".into()),
                ),
                (name("gpu.example.com", "index"), AttributeValue::Int(0)),
                (name("example.com", "healthy"), AttributeValue::Bool(true)),
            ],
            capacity: vec![(name("gpu.example.com", "memory"), 40 * (1 << 30) * 1000)],
        }
    }

    fn eval(expression: &str) -> Result<bool, String> {
        Selector::compile(expression)?.matches(Sym::new("gpu.example.com"), &gpu())
    }

    #[test]
    fn selectors_read_driver_attributes_and_capacity() {
        assert_eq!(eval(r#"device.driver == "gpu.example.com""#), Ok(true));
        assert_eq!(eval(r#"device.driver == "other""#), Ok(false));
        assert_eq!(
            eval(r#"device.attributes["gpu.example.com"].model == "a100""#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["example.com"].healthy"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("32Gi"))"#),
            Ok(false)
        );
        assert_eq!(
            eval(r#"device.capacity["gpu.example.com"].memory.asInteger() == 42949672960"#),
            Ok(true)
        );
    }

    #[test]
    fn errors_are_reported_not_swallowed() {
        assert!(Selector::compile("device.driver ==").is_err());
        assert!(eval(r#"device.attributes["gpu.example.com"].missing == 1"#).is_err());
        assert!(eval(r#"device.driver"#).is_err(), "not a boolean");
    }
}
