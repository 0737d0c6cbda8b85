//! Device selectors: CEL expressions over `device.driver`, `device.attributes[domain][id]`
//! and `device.capacity[domain][id]`, evaluated with the `cel` crate.
//!
//! Attributes without a domain are listed under the driver's name, as upstream's CEL
//! environment does. Capacities are numbers in thousandths of their unit; `quantity("1Gi")`
//! converts a quantity string the same way, so that upstream's
//! `device.capacity[d].memory.compareTo(quantity("1Gi")) >= 0` reads as written (as do
//! `isGreaterThan`, `isLessThan` and `asInteger`). Version attributes are semantic
//! versions, with the semver library's functions (see the `semver` module).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock, Mutex};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program, Value};
use gantry_api::dra::{
    AttributeValue, CEL_SELECTOR_EXPRESSION_MAX_COST, DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH, Device,
    MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, ResourceSlice, selector_too_long,
};
use gantry_api::release::{NEWEST_MINOR, OLDEST_MINOR};
use gantry_api::{Quantity, Release, Sym};

use super::library;
use super::semver::Semver;
use super::verdict_memo::VerdictMemo;

/// The deepest nesting an expression may have: cel-go's default `maxRecursionDepth`,
/// whose parser refuses deeper ones with "max recursion depth exceeded" (a chain of 251
/// `+` is one). The `cel` crate's parser limits bracket nesting (to 96) but builds chains
/// of operators, selections and indexes of any length, which its evaluator then walks
/// recursively until the stack overflows.
pub const MAX_DEPTH: usize = 250;

/// Stack an evaluation may take per level of nesting, with room to spare (unoptimised
/// builds take the most: some 25 KiB).
const STACK_PER_LEVEL: usize = 64 * 1024;

/// Stack the parser runs on: the `cel` crate's parser takes tens of KiB per level of
/// bracket nesting before its limit stops it, and its tree of a long chain is as deep as
/// the chain. Reserved, not committed.
const COMPILE_STACK: usize = 256 << 20;

/// A selector's verdict on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    No,
    Yes,
    /// The evaluation failed; [`Selector::matches`] says how.
    Error,
}

/// A compiled selector, shared between the pods that use the same expression.
pub struct Selector {
    program: Program,
    /// The minor release whose CEL environment the expression compiled in (and is
    /// evaluated in).
    minor: u8,
    /// Nesting of the expression, at most [`MAX_DEPTH`].
    depth: usize,
    /// Verdicts remembered by slice and by kind of device (see [`VerdictMemo`]).
    remembered: Mutex<VerdictMemo>,
}

impl Selector {
    /// Compiles the expression with upstream's limits: at most 10 KiB (the API server's
    /// `CELSelectorExpressionMaxLength`), nested at most [`MAX_DEPTH`] deep, and a
    /// worst-case cost within `CELSelectorExpressionMaxCost` (see [`estimated_cost`]).
    /// The error reads as the API server's `field.Error` body, on one line; a panic in
    /// the parser is caught and reported as an error. The environment is the newest
    /// release's; see [`compile_for`](Self::compile_for).
    pub fn compile(expression: &str) -> Result<Selector, String> {
        Self::compile_for(expression, Release::default())
    }

    /// [`compile`](Self::compile) in the CEL environment of `release`: the functions
    /// of the libraries it has (see the `library` module); a call to any other is
    /// refused as cel-go's checker refuses it, "undeclared reference".
    pub fn compile_for(expression: &str, release: Release) -> Result<Selector, String> {
        if let Some(message) = selector_too_long(expression) {
            return Err(message);
        }
        let minor = release.minor().clamp(OLDEST_MINOR, NEWEST_MINOR);
        let shared_devices = release.enabled(gantry_api::Gate::DRAConsumableCapacity);
        stacker::grow(COMPILE_STACK, || {
            catch_unwind(|| compile_within_limits(expression, minor, shared_devices))
                .unwrap_or_else(|panic| {
                    Err(format!(
                        "Invalid value: compilation failed: the CEL parser failed: {}",
                        panic_text(&*panic)
                    ))
                })
        })
    }

    /// Whether the device satisfies the expression. A result that is not a boolean, or
    /// a failed evaluation (a missing attribute, say), is an error; so is a panic in the
    /// evaluator. The evaluation runs on a stack deep enough for the expression's nesting.
    pub fn matches(&self, driver: Sym, device: &Device) -> Result<bool, String> {
        let red_zone = (self.depth + 16) * STACK_PER_LEVEL;
        stacker::maybe_grow(red_zone, 2 * red_zone, || {
            catch_unwind(AssertUnwindSafe(|| self.evaluate(driver, device))).unwrap_or_else(
                |panic| Err(format!("the CEL evaluator failed: {}", panic_text(&*panic))),
            )
        })
    }

    /// The verdicts on every device of `slice`, in its order: worked out once per slice
    /// (all its devices at once), then remembered until the slice is replaced; a device
    /// like one already judged (the same driver, attributes and capacities) takes that
    /// verdict without evaluating the expression. The lock is not held while CEL runs.
    pub fn verdicts(&self, slice: &Arc<ResourceSlice>) -> Arc<[Verdict]> {
        let known = {
            let mut memo = self.remembered.lock().expect("verdict lock poisoned");
            if let Some(verdicts) = memo.slice(slice) {
                return verdicts;
            }
            memo.by_kind(slice)
        };
        let verdicts: Arc<[Verdict]> = (slice.devices.iter().zip(known))
            .map(|(device, known)| {
                known.unwrap_or_else(|| match self.matches(slice.driver, device) {
                    Ok(true) => Verdict::Yes,
                    Ok(false) => Verdict::No,
                    Err(_) => Verdict::Error,
                })
            })
            .collect();
        let mut memo = self.remembered.lock().expect("verdict lock poisoned");
        memo.remember(slice, verdicts.clone());
        verdicts
    }

    /// [`matches`](Self::matches) for the `index`th device of `slice`, from the
    /// remembered verdicts; an error is worked out again, to be reported as it is.
    pub fn matches_in(&self, slice: &Arc<ResourceSlice>, index: usize) -> Result<bool, String> {
        match self.verdicts(slice)[index] {
            Verdict::Yes => Ok(true),
            Verdict::No => Ok(false),
            Verdict::Error => self.matches(slice.driver, &slice.devices[index]),
        }
    }

    fn evaluate(&self, driver: Sym, device: &Device) -> Result<bool, String> {
        ROOTS.with(|roots| {
            let mut scope = roots[usize::from(self.minor - OLDEST_MINOR)].new_inner_scope();
            scope.add_variable_from_value("device", device_value(driver, device));
            match self.program.execute(&scope) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!("expression returned {other:?}, not a boolean")),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

/// Parses and checks the functions called and the limits; runs on the deep compile
/// stack.
fn compile_within_limits(
    expression: &str,
    minor: u8,
    shared_devices: bool,
) -> Result<Selector, String> {
    let failed = |detail: &str| format!("Invalid value: compilation failed: {detail}");
    let env = &ENVS[usize::from(minor - OLDEST_MINOR)];
    let program = match catch_unwind(AssertUnwindSafe(|| env.compile(expression))) {
        Ok(Ok(program)) => program,
        Ok(Err(errors)) => {
            // The crate's recursion limit comes wrapped in an ANTLR error: say it plainly.
            if errors.errors.iter().any(|e| {
                e.msg.contains("Recursion limit of")
                    || format!("{:?}", e.source).contains("Recursion limit of")
            }) {
                return Err(failed("expression recursion limit exceeded: 96"));
            }
            // Formatting an error can panic too (a column past 65,535; the length limit
            // keeps columns below that).
            let text = catch_unwind(AssertUnwindSafe(|| errors.to_string()))
                .unwrap_or_else(|_| "syntax error".to_string());
            // One line: each error's message, without the source snippet and caret under
            // it (a line of the expression, up to 10 KiB).
            let messages: Vec<&str> = text
                .lines()
                .filter(|line| !line.starts_with('|'))
                .map(str::trim)
                .collect();
            return Err(failed(&messages.join(" ")));
        }
        Err(panic) => {
            return Err(failed(&format!(
                "the CEL parser failed: {}",
                panic_text(&*panic)
            )));
        }
    };
    let depth = depth(program.expression());
    if depth > MAX_DEPTH {
        return Err(failed("max recursion depth exceeded"));
    }
    if let Some((name, id)) = library::undeclared_call(program.expression(), minor) {
        let (line, column) = position(&program, id);
        return Err(failed(&format!(
            "ERROR: <input>:{line}:{column}: undeclared reference to '{name}' (in container '')"
        )));
    }
    if let Some((field, id)) = library::undefined_device_field(program.expression(), shared_devices)
    {
        let (line, column) = position(&program, id);
        return Err(failed(&format!(
            "ERROR: <input>:{line}:{column}: undefined field '{field}'"
        )));
    }
    if estimated_cost(program.expression()) > CEL_SELECTOR_EXPRESSION_MAX_COST {
        return Err("Forbidden: too complex, exceeds cost limit".to_string());
    }
    Ok(Selector {
        program,
        minor,
        depth,
        remembered: Mutex::default(),
    })
}

/// Line and column (from 1) of expression `id` in the source, as the crate's own errors
/// place them.
fn position(program: &Program, id: u64) -> (usize, usize) {
    let info = program.source_info();
    let Some((start, _)) = info.offset_for(id) else {
        return (1, 1);
    };
    let start = start as usize;
    let mut offset = 0;
    for (i, line) in info.source.split_inclusive('\n').enumerate() {
        if start < offset + line.len() {
            return (i + 1, start - offset + 1);
        }
        offset += line.len();
    }
    (1, 1)
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

/// The children of an expression node, in no particular order.
pub(super) fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(select) => vec![&*select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// The nesting of an expression (a leaf is 1), walked without recursion: the tree may be
/// thousands of levels deep.
pub fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        stack.extend(children(e).into_iter().map(|c| (c, d + 1)));
    }
    deepest
}

/// What a value may hold, at most: `len` elements (entries of a map, bytes of a string),
/// each shaped as `elem` (`None` for a string or a scalar).
#[derive(Debug, Clone, Default, PartialEq)]
struct Shape {
    len: u64,
    elem: Option<Box<Shape>>,
}

impl Shape {
    fn scalar() -> Shape {
        Shape::default()
    }

    fn string(bytes: u64) -> Shape {
        Shape {
            len: bytes,
            elem: None,
        }
    }

    fn collection(len: u64, elem: Shape) -> Shape {
        Shape {
            len,
            elem: Some(Box::new(elem)),
        }
    }

    fn is_collection(&self) -> bool {
        self.elem.is_some()
    }

    /// What one element may be.
    fn element(&self) -> Shape {
        self.elem.as_deref().cloned().unwrap_or_default()
    }

    /// Values in all (the collection, its elements, theirs...).
    fn cells(&self) -> u64 {
        match &self.elem {
            Some(elem) => 1u64.saturating_add(self.len.saturating_mul(elem.cells())),
            None => 1,
        }
    }

    /// Bytes of string in it (a string's own; 0 for collections, counted by cells).
    fn string_bytes(&self) -> u64 {
        if self.is_collection() { 0 } else { self.len }
    }

    /// The larger of two shapes, field by field.
    fn max(self, other: Shape) -> Shape {
        let elem = match (self.elem, other.elem) {
            (Some(a), Some(b)) => Some(Box::new(a.max(*b))),
            (a, b) => a.or(b),
        };
        Shape {
            len: self.len.max(other.len),
            elem,
        }
    }
}

/// A value's worst-case cost to compute, and its shape.
struct Estimate {
    cost: u64,
    shape: Shape,
}

/// Upper bound of the steps evaluating `root` takes against any device the API server
/// accepts (at most 32 attributes and capacities, string attributes of at most 64 bytes):
/// each node costs 1, a comprehension its range's size times its loop, building or
/// comparing collections their size, and strings a tenth of their bytes, as cel-go's
/// cost model charges them. Where cel-go stops an evaluation once its actual cost passes
/// `CELSelectorExpressionMaxCost` ("operation cancelled: actual cost limit exceeded"),
/// the `cel` crate has no cost hook: an expression whose worst case passes the limit is
/// refused when compiled instead, with the API server's "too complex, exceeds cost
/// limit", which also bounds the memory an evaluation can build (each element costs).
pub fn estimated_cost(root: &IdedExpr) -> u64 {
    let mut scope = Vec::new();
    estimate(root, &mut scope).cost
}

/// The shape of `device`: a map of driver, attributes and capacity, the last two maps of
/// domains to maps of names to values.
fn device_shape() -> Shape {
    let n = MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE as u64;
    let value = Shape::string(DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH as u64);
    let by_domain = Shape::collection(n, Shape::collection(n, value.clone()));
    Shape::collection(3, by_domain.max(value))
}

/// Strings cost a tenth of their bytes (cel-go's `common.StringTraversalCostFactor`).
fn string_cost(bytes: u64) -> u64 {
    bytes.div_ceil(10)
}

fn estimate(e: &IdedExpr, scope: &mut Vec<(String, Shape, bool)>) -> Estimate {
    let leaf = |shape| Estimate { cost: 1, shape };
    match &e.expr {
        Expr::Unspecified => leaf(Shape::scalar()),
        Expr::Literal(LiteralValue::String(s)) => leaf(Shape::string(s.inner().len() as u64)),
        Expr::Literal(LiteralValue::Bytes(b)) => leaf(Shape::string(b.len() as u64)),
        Expr::Literal(_) => leaf(Shape::scalar()),
        Expr::Ident(name) => match scope.iter().rev().find(|(n, _, _)| n == name) {
            Some((_, shape, _)) => leaf(shape.clone()),
            None if name == "device" => leaf(device_shape()),
            None => leaf(Shape::scalar()),
        },
        Expr::Select(select) => {
            let operand = estimate(&select.operand, scope);
            Estimate {
                cost: operand.cost.saturating_add(1),
                shape: if select.test {
                    Shape::scalar()
                } else {
                    operand.shape.element()
                },
            }
        }
        Expr::List(list) => {
            let mut cost = 1u64;
            let mut elem = Shape::scalar();
            for element in &list.elements {
                let estimate = estimate(element, scope);
                cost = cost.saturating_add(estimate.cost).saturating_add(1);
                elem = elem.max(estimate.shape);
            }
            Estimate {
                cost,
                shape: Shape::collection(list.elements.len() as u64, elem),
            }
        }
        Expr::Map(_) | Expr::Struct(_) => {
            let mut cost = 1u64;
            let mut elem = Shape::scalar();
            let parts = children(e);
            for (i, part) in parts.iter().enumerate() {
                let estimate = estimate(part, scope);
                cost = cost.saturating_add(estimate.cost).saturating_add(1);
                // Keys and values alternate for a map; a struct lists values only.
                if matches!(e.expr, Expr::Struct(_)) || i % 2 == 1 {
                    elem = elem.max(estimate.shape);
                }
            }
            Estimate {
                cost,
                shape: Shape::collection(parts.len() as u64, elem),
            }
        }
        Expr::Call(call) => {
            let mut cost = 1u64;
            let mut shapes = Vec::new();
            let accumulator_first = matches!(
                call.args.first().map(|a| &a.expr),
                Some(Expr::Ident(name)) if scope.iter().any(|(n, _, accu)| *accu && n == name)
            );
            for arg in call.target.iter().map(|t| &**t).chain(&call.args) {
                let estimate = estimate(arg, scope);
                cost = cost
                    .saturating_add(estimate.cost)
                    .saturating_add(string_cost(estimate.shape.string_bytes()));
                shapes.push(estimate.shape);
            }
            let shape = match call.func_name.as_str() {
                operators::ADD if shapes.len() == 2 => {
                    let (a, b) = (shapes[0].clone(), shapes[1].clone());
                    if a.is_collection() || b.is_collection() {
                        // A comprehension's accumulator grows in place: only the new
                        // elements are copied.
                        let copied = if accumulator_first {
                            b.cells()
                        } else {
                            a.cells().saturating_add(b.cells())
                        };
                        cost = cost.saturating_add(copied);
                        Shape::collection(a.len.saturating_add(b.len), a.element().max(b.element()))
                    } else {
                        Shape::string(a.len.saturating_add(b.len))
                    }
                }
                operators::EQUALS | operators::NOT_EQUALS | operators::IN => {
                    let compared = shapes
                        .iter()
                        .map(Shape::cells)
                        .fold(0u64, u64::saturating_add);
                    cost = cost.saturating_add(compared);
                    Shape::scalar()
                }
                operators::INDEX if !shapes.is_empty() => shapes[0].element(),
                operators::CONDITIONAL if shapes.len() == 3 => {
                    shapes[1].clone().max(shapes[2].clone())
                }
                operators::LOGICAL_AND | operators::LOGICAL_OR => Shape::scalar(),
                name if name.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                    // Library functions walk the collections they are given (as
                    // library/cost.go and cel-go's ext libraries charge them): the sets
                    // functions and `distinct` compare every element with every other.
                    let walked: Vec<u64> = shapes
                        .iter()
                        .filter(|s| s.is_collection())
                        .map(Shape::cells)
                        .collect();
                    let sets = matches!(
                        call.target.as_deref().map(|t| &t.expr),
                        Some(Expr::Ident(namespace)) if namespace == "sets"
                    );
                    let walk = if sets || name == "distinct" {
                        walked.iter().fold(1u64, |a, b| a.saturating_mul(*b))
                    } else {
                        walked.iter().fold(0u64, |a, b| a.saturating_add(*b))
                    };
                    cost = cost.saturating_add(if walked.is_empty() { 0 } else { walk });
                    match name {
                        // Lists made of the target's elements.
                        "sort" | "reverse" | "distinct" | "slice" | "flatten"
                            if shapes.first().is_some_and(Shape::is_collection) =>
                        {
                            shapes[0].clone()
                        }
                        // Lists of pieces of the target string.
                        "split" | "findAll" => {
                            let len = shapes.first().map_or(0, |s| s.len);
                            Shape::collection(len, Shape::string(len))
                        }
                        _ => shapes
                            .first()
                            .filter(|s| !s.is_collection())
                            .cloned()
                            .unwrap_or_default(),
                    }
                }
                _ => Shape::scalar(),
            };
            Estimate { cost, shape }
        }
        Expr::Comprehension(c) => {
            let range = estimate(&c.iter_range, scope);
            let init = estimate(&c.accu_init, scope);
            let n = range.shape.len;
            // Over a list the variable is an element; over a map, a key (a string).
            let item = range.shape.element();
            let bound = scope.len();
            scope.push((c.iter_var.clone(), item.clone(), false));
            if let Some(second) = &c.iter_var2 {
                scope.push((second.clone(), item.clone(), false));
            }
            // The accumulator may grow by what one step appends, once per element: a
            // first pass finds the elements' shape, a second prices the loop with it.
            let mut accumulator = Shape {
                len: init.shape.len.saturating_add(n),
                elem: init.shape.elem.clone(),
            };
            scope.push((c.accu_var.clone(), accumulator.clone(), true));
            let first = estimate(&c.loop_step, scope);
            if accumulator.is_collection() || first.shape.is_collection() {
                accumulator.elem = Some(Box::new(accumulator.element().max(first.shape.element())));
            } else {
                accumulator = accumulator.max(first.shape);
            }
            scope.last_mut().expect("pushed above").1 = accumulator;
            let step = estimate(&c.loop_step, scope);
            let condition = estimate(&c.loop_cond, scope);
            let result = estimate(&c.result, scope);
            scope.truncate(bound);
            let per_element = step
                .cost
                .saturating_add(condition.cost)
                .saturating_add(item.cells());
            Estimate {
                cost: range
                    .cost
                    .saturating_add(init.cost)
                    .saturating_add(n.saturating_mul(per_element))
                    .saturating_add(result.cost)
                    .saturating_add(1),
                shape: result.shape,
            }
        }
    }
}

/// Each release's environment (see the `library` module), from the oldest on.
static ENVS: LazyLock<Vec<Arc<Env>>> = LazyLock::new(|| {
    (OLDEST_MINOR..=NEWEST_MINOR)
        .map(|minor| Arc::new(library::env(minor)))
        .collect()
});

thread_local! {
    /// Each release's environment with the functions of Kubernetes' libraries, from the
    /// oldest on, built once per thread.
    static ROOTS: Vec<Context<'static, 'static>> = ENVS.iter().map(|env| root_context(env.clone())).collect();
}

fn root_context(env: Arc<Env>) -> Context<'static, 'static> {
    use cel::extractors::{Arguments, This};
    let mut context = Context::with_env(env);
    library::add_functions(&mut context);
    let declare = |result: Result<(), cel::DeclarationError>| {
        result.expect("the quantity functions do not clash with CEL's standard library")
    };
    declare(context.add_function("quantity", |text: Arc<String>| {
        Quantity::parse(&text)
            .and_then(|q| q.milli_value())
            .map_err(|e| ExecutionError::function_error("quantity", e.to_string()))
    }));
    // Quantities (numbers here) and semantic versions both compare.
    declare(
        context.add_function("compareTo", |This(a): This<Value>, b: Value| {
            compare("compareTo", &a, &b).map(|o| o as i64)
        }),
    );
    declare(
        context.add_function("isGreaterThan", |This(a): This<Value>, b: Value| {
            compare("isGreaterThan", &a, &b).map(|o| o.is_gt())
        }),
    );
    declare(
        context.add_function("isLessThan", |This(a): This<Value>, b: Value| {
            compare("isLessThan", &a, &b).map(|o| o.is_lt())
        }),
    );
    declare(context.add_function("asInteger", |This(a): This<i64>| a / 1000));
    declare(
        context.add_function("semver", |text: Arc<String>, args: Arguments| {
            let normalize = matches!(args.0.get(1), Some(Value::Bool(true)));
            let parsed = if normalize {
                Semver::parse_normalized(&text)
            } else {
                Semver::parse(&text)
            };
            parsed
                .map(|v| Value::Opaque(Arc::new(v)))
                .map_err(|e| ExecutionError::function_error("semver", e))
        }),
    );
    declare(
        context.add_function("isSemver", |text: Arc<String>, args: Arguments| {
            let normalize = matches!(args.0.get(1), Some(Value::Bool(true)));
            if normalize {
                Semver::parse_normalized(&text).is_ok()
            } else {
                Semver::parse(&text).is_ok()
            }
        }),
    );
    for (name, part) in [
        ("major", Semver::major as fn(&Semver) -> u64),
        ("minor", Semver::minor),
        ("patch", Semver::patch),
    ] {
        declare(context.add_function(name, move |This(a): This<Value>| {
            semver_of(name, &a).map(|v| part(v) as i64)
        }));
    }
    context
}

fn semver_of<'a>(function: &str, value: &'a Value) -> Result<&'a Semver, ExecutionError> {
    match value {
        Value::Opaque(o) => o
            .downcast_ref::<Semver>()
            .ok_or_else(|| ExecutionError::function_error(function, "not a semver")),
        _ => Err(ExecutionError::function_error(function, "not a semver")),
    }
}

/// Orders two quantities (numbers here) or two versions.
fn compare(function: &str, a: &Value, b: &Value) -> Result<std::cmp::Ordering, ExecutionError> {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Ok(a.cmp(b)),
        _ => Ok(semver_of(function, a)?.cmp(semver_of(function, b)?)),
    }
}

fn device_value(driver: Sym, device: &Device) -> Value {
    let mut attributes: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    for (name, value) in &device.attributes {
        let value = match value {
            AttributeValue::Int(i) => Value::Int(*i),
            AttributeValue::Bool(b) => Value::Bool(*b),
            AttributeValue::String(s) => Value::from(&**s),
            // The API server accepts only valid versions; one that is not stays a
            // string, and a comparison with it fails as upstream's would not be reached.
            AttributeValue::Version(s) => match Semver::parse(s) {
                Ok(version) => Value::Opaque(Arc::new(version)),
                Err(_) => Value::from(&**s),
            },
        };
        attributes
            .entry(key(name.domain))
            .or_default()
            .insert(key(name.id), value);
    }
    let mut capacity: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    for entry in &device.capacity {
        capacity
            .entry(key(entry.name.domain))
            .or_default()
            .insert(key(entry.name.id), Value::Int(entry.value));
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
    // DRAConsumableCapacity's field (a selector naming it compiles only with the gate on).
    root.insert(
        key_str("allowMultipleAllocations"),
        Value::Bool(device.allow_multiple_allocations),
    );
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
            binding: None,
            binds_to_node: false,
            name: Sym::new("gpu-0"),
            attributes: vec![
                (
                    name("gpu.example.com", "model"),
                    AttributeValue::String("a100".into()),
                ),
                (name("gpu.example.com", "index"), AttributeValue::Int(0)),
                (name("example.com", "healthy"), AttributeValue::Bool(true)),
                (
                    name("gpu.example.com", "driverVersion"),
                    AttributeValue::Version("2.1.0-rc.1".into()),
                ),
            ],
            capacity: vec![gantry_api::dra::DeviceCapacity::new(
                name("gpu.example.com", "memory"),
                "memory",
                40 * (1 << 30) * 1000,
            )],
            taints: Vec::new(),
            consumes_counters: Vec::new(),
            allow_multiple_allocations: false,
        }
    }

    fn eval(expression: &str) -> Result<bool, String> {
        Selector::compile(expression)?.matches(Sym::new("gpu.example.com"), &gpu())
    }

    /// Version attributes compare as semantic versions (semverlib's functions).
    #[test]
    fn versions_compare_as_semantic_versions() {
        let v = r#"device.attributes["gpu.example.com"].driverVersion"#;
        for (expression, want) in [
            (format!(r#"{v}.isGreaterThan(semver("2.0.0"))"#), true),
            (format!(r#"{v}.isLessThan(semver("2.1.0"))"#), true),
            (format!(r#"{v}.compareTo(semver("2.1.0-rc.2")) < 0"#), true),
            (format!(r#"{v} == semver("2.1.0-rc.1+build")"#), true),
            (
                format!(r#"{v}.major() == 2 && {v}.minor() == 1 && {v}.patch() == 0"#),
                true,
            ),
            (r#"semver("v2", true) == semver("2.0.0")"#.to_string(), true),
            (
                r#"isSemver("2.0") || isSemver("v2.0.0")"#.to_string(),
                false,
            ),
        ] {
            assert_eq!(eval(&expression), Ok(want), "{expression}");
        }
        assert!(eval(r#"semver("2.0") == semver("2.0.0")"#).is_err());
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

    fn list(n: usize) -> String {
        let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        format!("[{}]", items.join(", "))
    }

    #[test]
    fn expressions_past_upstreams_length_are_refused_uncompiled() {
        let within = format!(r#"device.driver == "{}""#, "x".repeat(10240 - 19));
        assert_eq!(within.len(), 10240);
        assert!(Selector::compile(&within).is_ok());
        let over = format!(r#"device.driver == "{}""#, "x".repeat(10240 - 18));
        assert_eq!(
            Selector::compile(&over).err().as_deref(),
            Some("Too long: may not be more than 10240 bytes")
        );
    }

    #[test]
    fn deep_nesting_is_refused_before_it_overflows_a_stack() {
        // 5,000 terms: parsed without recursion, but the evaluator would recurse per term.
        let chain = format!("{} == 1", vec!["1"; 5000].join("+"));
        assert_eq!(
            Selector::compile(&chain).err().as_deref(),
            Some("Invalid value: compilation failed: max recursion depth exceeded")
        );
        let selections = format!("device{} == 1", ".a".repeat(3000));
        assert!(Selector::compile(&selections).is_err());
        let parentheses = format!("{}true{}", "(".repeat(5000), ")".repeat(5000));
        assert_eq!(
            Selector::compile(&parentheses).err().as_deref(),
            Some("Invalid value: compilation failed: expression recursion limit exceeded: 96")
        );
    }

    #[test]
    fn nesting_within_the_limit_evaluates_on_a_small_stack() {
        // Unoptimised, each level takes some 25 KiB: 240 of them are more than a 2 MiB
        // thread (a test's, rayon's) has, so the evaluation grows its stack.
        let chain = format!(
            r#"device.driver == "gpu.example.com"{}"#,
            r#" + """#.repeat(230)
        );
        let selector = Selector::compile(&chain).unwrap();
        assert!(selector.depth > 200 && selector.depth <= MAX_DEPTH);
        let small = std::thread::Builder::new().stack_size(1 << 20);
        let matched = small
            .spawn(move || selector.matches(Sym::new("gpu.example.com"), &gpu()))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(matched, Ok(true));
    }

    #[test]
    fn a_syntax_error_far_along_a_line_is_one_line_not_a_panic() {
        let late = format!("1 == {})", " ".repeat(9000));
        let error = Selector::compile(&late).err().unwrap();
        assert!(
            error.starts_with("Invalid value: compilation failed: ERROR: <input>:1:"),
            "{error}"
        );
        assert!(!error.contains('\n') && error.len() < 500, "{error}");
        // Past column 65,535 the crate's error formatting panics; the length limit keeps
        // expressions short of that, and the compiler catches it anyway.
        let later = format!("1 == {})", " ".repeat(70_000));
        let error = compile_within_limits(&later, NEWEST_MINOR, true)
            .err()
            .unwrap();
        assert!(
            error.starts_with("Invalid value: compilation failed:"),
            "{error}"
        );
    }

    /// Upstream's `allow_multiple_allocations_*` rows (`dynamic-resource-allocation/cel`,
    /// `compile_test.go`): with DRAConsumableCapacity the device has the field; without it
    /// the field is undefined, as is any field the device type lacks.
    #[test]
    fn allow_multiple_allocations_is_a_field_only_with_its_gate() {
        let on = gantry_api::Release::parse(Some("1.36"), None).unwrap();
        let off =
            gantry_api::Release::parse(Some("1.36"), Some("DRAConsumableCapacity=false")).unwrap();
        let mut shared = gpu();
        shared.allow_multiple_allocations = true;
        let expression = "device.allowMultipleAllocations == true";
        let selector = Selector::compile_for(expression, on).unwrap();
        assert_eq!(
            selector.matches(Sym::new("gpu.example.com"), &shared),
            Ok(true)
        );
        assert_eq!(
            selector.matches(Sym::new("gpu.example.com"), &gpu()),
            Ok(false)
        );
        let error = Selector::compile_for("device.allowMultipleAllocations == false", off)
            .err()
            .unwrap();
        assert!(
            error.contains("undefined field 'allowMultipleAllocations'"),
            "{error}"
        );
        let error = Selector::compile_for("device.name == \"gpu-0\"", on)
            .err()
            .unwrap();
        assert!(error.contains("undefined field 'name'"), "{error}");
        // A comprehension's own `device` is not the device.
        let bound = "[{'name': 1}].all(device, device.name == 1)";
        assert!(Selector::compile_for(bound, on).is_ok());
    }

    #[test]
    fn expressions_that_would_run_for_minutes_are_too_complex() {
        // Upstream's own example (validation_resourceclaim_test.go, "CEL-cost"): seven
        // nested all() over ten elements, 10^7 steps.
        let ten = list(10);
        let nested = format!(
            "{ten}.all(x, {ten}.all(y, {ten}.all(z, {ten}.all(z2, {ten}.all(z3, {ten}.all(z4, {ten}.all(z5, x + y + z + z2 + z3 + z4 + z5 < 100)))))))"
        );
        assert_eq!(
            Selector::compile(&nested).err().as_deref(),
            Some("Forbidden: too complex, exceeds cost limit")
        );
        // Lists of lists built by map(): their size, not only the steps, counts.
        let wide = list(100);
        let grown = format!("{wide}.map(x, {wide}.map(y, {wide}.map(z, {wide}))).size() > 0");
        assert_eq!(
            Selector::compile(&grown).err().as_deref(),
            Some("Forbidden: too complex, exceeds cost limit")
        );
        // Iterating what a device holds is bounded by the API server's 32 attributes and
        // capacities: twice nested is 1,024 steps; four times, 32^4, too many.
        let twice = r#"device.attributes.all(d, device.attributes[d].all(a, a != ""))"#;
        assert!(Selector::compile(twice).is_ok());
        let four = r#"device.attributes.all(d, device.attributes[d].all(a, device.capacity.all(c, device.capacity[c].all(k, true))))"#;
        assert!(Selector::compile(four).is_err());
    }

    #[test]
    fn the_cost_estimate_bounds_the_steps() {
        let cost = |e: &str| estimated_cost(Program::compile(e).unwrap().expression());
        assert!(cost("true") <= 2);
        let flat = cost(&format!("{}.all(x, x > 0)", list(100)));
        assert!((300..5000).contains(&flat), "{flat}");
        let nested = cost(&format!("{0}.all(x, {0}.all(y, x > y))", list(100)));
        assert!(nested > 30_000, "{nested}");
        // String building is charged by the bytes.
        let long = "y".repeat(5000);
        let strings = cost(&format!(
            r#"{}.map(x, "{long}" + "{long}").size() > 0"#,
            list(1000)
        ));
        assert!(strings > 1_000_000, "{strings}");
        // Library functions are charged the collections they walk.
        let sets = cost(&format!("sets.intersects({0}, {0})", list(1000)));
        assert!(sets >= 1_000_000, "{sets}");
        let sorted = cost(&format!("{}.isSorted()", list(1000)));
        assert!((1000..10_000).contains(&sorted), "{sorted}");
    }

    #[test]
    fn errors_are_reported_not_swallowed() {
        assert!(Selector::compile("device.driver ==").is_err());
        assert!(eval(r#"device.attributes["gpu.example.com"].missing == 1"#).is_err());
        assert!(eval(r#"device.driver"#).is_err(), "not a boolean");
    }
}
