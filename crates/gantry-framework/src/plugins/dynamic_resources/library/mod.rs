//! The CEL environment of device selectors, release by release: cel-go's standard
//! library (with `matches`, timestamps and durations) and the libraries Kubernetes adds
//! to it (`k8s.io/apiserver/pkg/cel/environment/base.go`), with the release each came
//! in; DRA's own additions (`k8s.io/dynamic-resource-allocation/cel/compile.go`: the
//! `device` variable, `cel.bind`, semantic versions) come from `cel.rs` and here.
//!
//! The scheduler compiles selectors with the environment for stored expressions, which
//! holds every library its own release has (the compatibility version only restricts new
//! expressions): a library introduced at v1.N is there from release N on.
//!
//! | since | library |
//! |---|---|
//! | 1.0 | standard library; Kubernetes' URLs, regex (`find`, `findAll`), lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`); `ext.Strings` v0 |
//! | 1.28 | quantities; optional types |
//! | 1.29 | `ext.Strings` v2 (`format`, `strings.quote`); `ext.Sets` |
//! | 1.30 | IP addresses and CIDRs |
//! | 1.31 | Kubernetes' format library (not modelled); `cel.bind` (DRA's `ext.Bindings`); semantic versions (DRA's, in the base from 1.33) |
//! | 1.32 | two-variable comprehensions (not modelled) |
//! | 1.34 | `ext.Lists` v3 (`slice`, `flatten`, `distinct`, `reverse`, `sort`, `sortBy`, `lists.range`) |
//!
//! The `cel` crate has no type checker: where cel-go refuses a call to an undeclared
//! function when the expression is compiled, [`undeclared_call`] finds it by name.

use std::cmp::Ordering;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{LIST_TYPE, Type};
use cel::common::value::CowVal;
use cel::extractors::{Arguments, This};
use cel::objects::{Key, Map, Opaque};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{Context, DeclarationError, Env, ExecutionError, Value};

/// The functions a selector may call at a release, by the minor version that brought
/// them in: cel-go's standard ones first, then Kubernetes' (base.go's
/// `IntroducedVersion`s).
const FUNCTIONS: &[(u8, &[&str])] = &[
    // cel-go's standard library (the `cel` crate's, with its `regex` and `chrono`
    // features).
    (
        0,
        &[
            "size",
            "contains",
            "startsWith",
            "endsWith",
            "matches",
            "int",
            "uint",
            "double",
            "string",
            "bytes",
            "bool",
            "dyn",
            "type",
            "duration",
            "timestamp",
            "getFullYear",
            "getMonth",
            "getDayOfYear",
            "getDayOfMonth",
            "getDate",
            "getDayOfWeek",
            "getHours",
            "getMinutes",
            "getSeconds",
            "getMilliseconds",
        ],
    ),
    // library.URLs, library.Regex, library.Lists.
    (
        0,
        &[
            "url",
            "isURL",
            "getScheme",
            "getHost",
            "getHostname",
            "getPort",
            "getEscapedPath",
            "getQuery",
            "find",
            "findAll",
            "isSorted",
            "sum",
            "min",
            "max",
            "indexOf",
            "lastIndexOf",
        ],
    ),
    // ext.Strings version 0 (join included).
    (
        0,
        &[
            "charAt",
            "lowerAscii",
            "upperAscii",
            "replace",
            "split",
            "substring",
            "trim",
            "join",
        ],
    ),
    // library.Quantity (but `add` and `sub`: quantities are numbers of thousandths here,
    // so `q.add(2)` could not be told from `q.add(quantity("2m"))`; they stay undeclared,
    // refused when compiled rather than answering wrongly); cel.OptionalTypes.
    (
        28,
        &[
            "quantity",
            "isQuantity",
            "sign",
            "isInteger",
            "asInteger",
            "asApproximateFloat",
            "compareTo",
            "isGreaterThan",
            "isLessThan",
            "optional.of",
            "optional.ofNonZeroValue",
            "optional.none",
            "hasValue",
            "value",
            "or",
            "orValue",
        ],
    ),
    // ext.Strings version 2; ext.Sets.
    (
        29,
        &[
            "format",
            "strings.quote",
            "sets.contains",
            "sets.equivalent",
            "sets.intersects",
        ],
    ),
    // library.IP, library.CIDR.
    (
        30,
        &[
            "ip",
            "isIP",
            "ip.isCanonical",
            "family",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
            "cidr",
            "isCIDR",
            "containsIP",
            "containsCIDR",
            "masked",
            "prefixLength",
        ],
    ),
    // DRA's semantic versions (compile.go from v1.31; base.go's SemverLib from v1.33).
    (31, &["semver", "isSemver", "major", "minor", "patch"]),
    // ext.Lists version 3 (v2's functions; v3 adds their cost estimates).
    (
        34,
        &[
            "slice",
            "flatten",
            "distinct",
            "reverse",
            "sort",
            "lists.range",
        ],
    ),
];

/// Whether `name` is a function a selector may call at minor release `minor`.
pub fn declared(minor: u8, name: &str) -> bool {
    FUNCTIONS
        .iter()
        .any(|(since, names)| *since <= minor && names.contains(&name))
}

/// The first call in `root` to a function the release does not declare: its name and
/// the id of the call. Operators and the crate's internal functions (named with a
/// symbol first) are not looked at; a call on a qualified name (`strings.quote(s)`,
/// `ip.isCanonical(s)`) names the qualified function when that is declared.
pub fn undeclared_call(root: &IdedExpr, minor: u8) -> Option<(String, u64)> {
    // Names bound by comprehensions anywhere in the expression (`cel.bind`'s too): a
    // call on one is a member call on a variable, not a namespace's function.
    let mut bound = vec!["device".to_string()];
    let mut stack = vec![root];
    while let Some(e) = stack.pop() {
        if let Expr::Comprehension(c) = &e.expr {
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
        }
        stack.extend(super::cel::children(e));
    }
    let mut stack = vec![root];
    while let Some(e) = stack.pop() {
        if let Expr::Call(call) = &e.expr
            && call
                .func_name
                .starts_with(|c: char| c.is_ascii_alphabetic())
        {
            let target = call.target.as_deref();
            let qualified = target
                .and_then(qualified_name)
                .map(|name| format!("{name}.{}", call.func_name));
            let namespace = target
                .is_some_and(|t| matches!(&t.expr, Expr::Ident(name) if !bound.contains(name)));
            match qualified {
                Some(q) if declared(minor, &q) => continue,
                Some(q) if namespace => return Some((q, e.id)),
                _ if declared(minor, &call.func_name) => {}
                _ => return Some((call.func_name.clone(), e.id)),
            }
        }
        stack.extend(super::cel::children(e));
    }
    None
}

/// The first field of `device` the environment does not declare (cel-go's checker:
/// "undefined field"), with the selection's id: `driver`, `attributes` and `capacity`,
/// and `allowMultipleAllocations` with DRAConsumableCapacity (upstream's
/// `deviceTypeV134ConsumableCapacity`, picked by the gate). A comprehension that names its
/// variable `device` hides the device (no check then).
pub fn undefined_device_field(root: &IdedExpr, shared_devices: bool) -> Option<(String, u64)> {
    let mut stack = vec![root];
    let mut selects = Vec::new();
    while let Some(e) = stack.pop() {
        match &e.expr {
            Expr::Comprehension(c)
                if c.iter_var == "device" || c.iter_var2.as_deref() == Some("device") =>
            {
                return None;
            }
            Expr::Select(select) if matches!(&select.operand.expr, Expr::Ident(n) if n == "device") =>
            {
                selects.push((select.field.clone(), e.id));
            }
            _ => {}
        }
        stack.extend(super::cel::children(e));
    }
    selects.sort_by_key(|(_, id)| *id);
    let declared = |field: &str| {
        matches!(field, "driver" | "attributes" | "capacity")
            || (shared_devices && field == "allowMultipleAllocations")
    };
    selects.into_iter().find(|(field, _)| !declared(field))
}

/// The dotted name an expression spells (`a`, `a.b.c`), if it is one.
fn qualified_name(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => Some(format!(
            "{}.{}",
            qualified_name(&select.operand)?,
            select.field
        )),
        _ => None,
    }
}

/// The environment of release `minor`: the standard library, `ext.Strings`, `ext.Lists`
/// (from v1.34), the overloads that share a name with those, and the macros.
pub fn env(minor: u8) -> Env {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)
        .expect("the strings extension registers once");
    if minor >= 34 {
        env.add_extension(cel::extensions::lists)
            .expect("the lists extension registers once");
    }
    env.add_extension(shared_names)
        .expect("Kubernetes' overloads do not clash with the extensions'");
    if minor >= 31 {
        env.add_macro(Macro::receiver("bind", 3, bind_macro))
            .expect("cel.bind is declared once");
    }
    env
}

/// Overloads of names the standard library or the extensions already declare: those
/// must be overloads, not context functions. `list.indexOf(x)`, `list.lastIndexOf(x)`
/// (library.Lists), and `string(ip)`, `string(cidr)`.
fn shared_names(env: &mut Env) -> Result<(), DeclarationError> {
    use cel::common::types::DYN_TYPE;
    env.add_member_overload(
        "indexOf",
        "list_a_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_a_last_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_last_index_of,
    )?;
    env.add_overload(
        "string",
        "ip_to_string",
        vec![Type::new_opaque_type(IP_TYPE)],
        opaque_to_string,
    )?;
    env.add_overload(
        "string",
        "cidr_to_string",
        vec![Type::new_opaque_type(CIDR_TYPE)],
        opaque_to_string,
    )?;
    Ok(())
}

fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn cel::common::value::Val>::try_from(
        value,
    )?))
}

fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, item] = <[Value; 2]>::try_from(values(&args)?)
        .map_err(|_| ExecutionError::invalid_argument_count(2, args.len()))?;
    let Value::List(list) = list else {
        return Err(ExecutionError::function_error("indexOf", "not a list"));
    };
    owned(Value::Int(
        list.iter()
            .position(|x| *x == item)
            .map_or(-1, |i| i as i64),
    ))
}

fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, item] = <[Value; 2]>::try_from(values(&args)?)
        .map_err(|_| ExecutionError::invalid_argument_count(2, args.len()))?;
    let Value::List(list) = list else {
        return Err(ExecutionError::function_error("lastIndexOf", "not a list"));
    };
    owned(Value::Int(
        list.iter()
            .rposition(|x| *x == item)
            .map_or(-1, |i| i as i64),
    ))
}

fn opaque_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = match values(&args)?.first() {
        Some(Value::Opaque(o)) => {
            if let Some(ip) = o.downcast_ref::<Ip>() {
                ip.0.to_string()
            } else if let Some(cidr) = o.downcast_ref::<Cidr>() {
                cidr.to_string()
            } else {
                return Err(ExecutionError::function_error(
                    "string",
                    "not an IP or CIDR",
                ));
            }
        }
        _ => {
            return Err(ExecutionError::function_error(
                "string",
                "not an IP or CIDR",
            ));
        }
    };
    owned(Value::from(text))
}

/// `cel.bind(name, init, expr)` (cel-go's `ext.Bindings`): `expr` with `name` bound to
/// `init`, as a comprehension over nothing whose accumulator is the binding.
fn bind_macro(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
        return Ok(None);
    }
    let result = args.pop().expect("three arguments");
    let init = args.pop().expect("three arguments");
    let name = args.pop().expect("three arguments");
    let Expr::Ident(name) = name.expr else {
        return Err(helper.new_error(
            name.id,
            "cel.bind() variable names must be simple identifiers",
        ));
    };
    let range = helper.next_expr(Expr::List(cel::common::ast::ListExpr {
        elements: Vec::new(),
        optional_indices: Vec::new(),
    }));
    let condition = helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into())));
    let step = helper.next_expr(Expr::Ident(name.clone()));
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(
        ComprehensionExpr {
            iter_range: range,
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: name,
            accu_init: init,
            loop_cond: condition,
            loop_step: step,
            result,
        },
    )))))
}

/// Registers Kubernetes' functions whose names nothing else declares, as context
/// functions (each checks its arguments itself).
pub fn add_functions(context: &mut Context<'static, 'static>) {
    let declare = |name: &str, result: Result<(), DeclarationError>| {
        result.unwrap_or_else(|e| panic!("{name}: {e:?}"));
    };
    // library.Lists.
    declare(
        "isSorted",
        context.add_function("isSorted", |This(list): This<Value>| {
            let items = list_items("isSorted", &list)?;
            for pair in items.windows(2) {
                if compare("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
                    return Ok(false);
                }
            }
            Ok::<_, ExecutionError>(true)
        }),
    );
    declare(
        "sum",
        context.add_function("sum", |This(list): This<Value>| sum(&list)),
    );
    declare(
        "min",
        context.add_function("min", |This(list): This<Value>| {
            extreme("min", &list, Ordering::Less)
        }),
    );
    declare(
        "max",
        context.add_function("max", |This(list): This<Value>| {
            extreme("max", &list, Ordering::Greater)
        }),
    );
    // library.Regex.
    declare(
        "find",
        context.add_function("find", |This(s): This<Arc<String>>, re: Arc<String>| {
            let re = regex("find", &re)?;
            Ok::<_, ExecutionError>(Value::from(re.find(&s).map_or("", |m| m.as_str())))
        }),
    );
    declare(
        "findAll",
        context.add_function(
            "findAll",
            |This(s): This<Arc<String>>, re: Arc<String>, Arguments(args): Arguments| {
                let re = regex("findAll", &re)?;
                // The arguments after the target: the pattern, then the limit.
                let limit = match args.get(1) {
                    None => -1,
                    Some(Value::Int(n)) => *n,
                    Some(_) => {
                        return Err(ExecutionError::function_error(
                            "findAll",
                            "limit must be an int",
                        ));
                    }
                };
                let found = re.find_iter(&s).map(|m| Value::from(m.as_str()));
                let found: Vec<Value> = match usize::try_from(limit) {
                    Ok(n) => found.take(n).collect(),
                    Err(_) => found.collect(),
                };
                Ok(Value::List(Arc::new(found)))
            },
        ),
    );
    // library.URLs.
    declare(
        "url",
        context.add_function("url", |This(s): This<Arc<String>>| {
            Url::parse(&s)
                .map(|u| Value::Opaque(Arc::new(u)))
                .map_err(|e| {
                    ExecutionError::function_error(
                        "url",
                        format!("URL parse error during conversion from string: {e}"),
                    )
                })
        }),
    );
    declare(
        "isURL",
        context.add_function("isURL", |This(s): This<Arc<String>>| Url::parse(&s).is_ok()),
    );
    for (name, part) in [
        ("getScheme", Url::scheme as fn(&Url) -> String),
        ("getHost", Url::host),
        ("getHostname", Url::hostname),
        ("getPort", Url::port),
        ("getEscapedPath", Url::escaped_path),
    ] {
        declare(
            name,
            context.add_function(name, move |This(u): This<Value>| {
                Ok::<_, ExecutionError>(Value::from(part(url_of(name, &u)?)))
            }),
        );
    }
    declare(
        "getQuery",
        context.add_function("getQuery", |This(u): This<Value>| {
            Ok::<_, ExecutionError>(url_of("getQuery", &u)?.query())
        }),
    );
    // ext.Sets.
    declare(
        "sets.contains",
        context.add_function("sets.contains", |a: Value, b: Value| {
            let (a, b) = (
                list_items("sets.contains", &a)?,
                list_items("sets.contains", &b)?,
            );
            Ok::<_, ExecutionError>(b.iter().all(|x| a.contains(x)))
        }),
    );
    declare(
        "sets.equivalent",
        context.add_function("sets.equivalent", |a: Value, b: Value| {
            let (a, b) = (
                list_items("sets.equivalent", &a)?,
                list_items("sets.equivalent", &b)?,
            );
            Ok::<_, ExecutionError>(
                b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x)),
            )
        }),
    );
    declare(
        "sets.intersects",
        context.add_function("sets.intersects", |a: Value, b: Value| {
            let (a, b) = (
                list_items("sets.intersects", &a)?,
                list_items("sets.intersects", &b)?,
            );
            Ok::<_, ExecutionError>(a.iter().any(|x| b.contains(x)))
        }),
    );
    // library.Quantity's functions beyond those of `cel.rs` (quantities are numbers of
    // thousandths of their unit here).
    declare(
        "isQuantity",
        context.add_function("isQuantity", |This(s): This<Arc<String>>| {
            gantry_api::Quantity::parse(&s).is_ok()
        }),
    );
    declare(
        "sign",
        context.add_function("sign", |This(q): This<i64>| q.signum()),
    );
    declare(
        "isInteger",
        context.add_function("isInteger", |This(q): This<i64>| q % 1000 == 0),
    );
    declare(
        "asApproximateFloat",
        context.add_function("asApproximateFloat", |This(q): This<i64>| q as f64 / 1000.0),
    );
    // library.IP and library.CIDR. `ip` is also CIDR's member `cidr.ip()`.
    declare(
        "ip",
        context.add_function("ip", |This(v): This<Value>| match &v {
            Value::String(s) => parse_ip(s).map(|ip| Value::Opaque(Arc::new(ip))),
            Value::Opaque(o) => match o.downcast_ref::<Cidr>() {
                Some(cidr) => Ok(Value::Opaque(Arc::new(Ip(cidr.addr)))),
                None => Err(no_overload("ip")),
            },
            _ => Err(no_overload("ip")),
        }),
    );
    declare(
        "isIP",
        context.add_function("isIP", |This(s): This<Arc<String>>| parse_ip(&s).is_ok()),
    );
    declare(
        "ip.isCanonical",
        context.add_function("ip.isCanonical", |s: Arc<String>| {
            parse_ip(&s).map(|ip| ip.0.to_string() == *s)
        }),
    );
    for (name, test) in [
        ("isUnspecified", Ip::is_unspecified as fn(&Ip) -> bool),
        ("isLoopback", Ip::is_loopback),
        ("isLinkLocalMulticast", Ip::is_link_local_multicast),
        ("isLinkLocalUnicast", Ip::is_link_local_unicast),
        ("isGlobalUnicast", Ip::is_global_unicast),
    ] {
        declare(
            name,
            context.add_function(name, move |This(v): This<Value>| ip_of(name, &v).map(test)),
        );
    }
    declare(
        "family",
        context.add_function("family", |This(v): This<Value>| {
            ip_of("family", &v).map(|ip| if ip.0.is_ipv4() { 4i64 } else { 6 })
        }),
    );
    declare(
        "cidr",
        context.add_function("cidr", |This(s): This<Arc<String>>| {
            parse_cidr(&s).map(|c| Value::Opaque(Arc::new(c)))
        }),
    );
    declare(
        "isCIDR",
        context.add_function("isCIDR", |This(s): This<Arc<String>>| {
            parse_cidr(&s).is_ok()
        }),
    );
    declare(
        "containsIP",
        context.add_function("containsIP", |This(c): This<Value>, other: Value| {
            let cidr = cidr_of("containsIP", &c)?;
            let ip = match &other {
                Value::String(s) => parse_ip(s)?,
                other => ip_of("containsIP", other)?.clone(),
            };
            Ok::<_, ExecutionError>(cidr.contains(ip.0))
        }),
    );
    declare(
        "containsCIDR",
        context.add_function("containsCIDR", |This(c): This<Value>, other: Value| {
            let cidr = cidr_of("containsCIDR", &c)?;
            let other = match &other {
                Value::String(s) => parse_cidr(s)?,
                other => cidr_of("containsCIDR", other)?.clone(),
            };
            Ok::<_, ExecutionError>(cidr.contains_cidr(&other))
        }),
    );
    declare(
        "masked",
        context.add_function("masked", |This(c): This<Value>| {
            cidr_of("masked", &c).map(|c| Value::Opaque(Arc::new(c.masked())))
        }),
    );
    declare(
        "prefixLength",
        context.add_function("prefixLength", |This(c): This<Value>| {
            cidr_of("prefixLength", &c).map(|c| c.bits as i64)
        }),
    );
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::function_error(function, "no such overload")
}

fn list_items<'a>(function: &str, list: &'a Value) -> Result<&'a [Value], ExecutionError> {
    match list {
        Value::List(items) => Ok(items),
        _ => Err(no_overload(function)),
    }
}

/// Orders two values of one comparable type (cel-go's `traits.Comparer`), numbers of
/// different types by value; values that do not compare are an error.
fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    match (a, b) {
        (Value::Bytes(a), Value::Bytes(b)) => Ok(a.cmp(b)),
        (Value::Null, _) | (_, Value::Null) => Err(no_overload(function)),
        _ => a.partial_cmp(b).ok_or_else(|| no_overload(function)),
    }
}

/// `list.min()` / `list.max()`: the first element no other is `prefer`red to; an empty
/// list is an error.
fn extreme(function: &str, list: &Value, prefer: Ordering) -> Result<Value, ExecutionError> {
    let items = list_items(function, list)?;
    let mut best: Option<&Value> = None;
    for item in items {
        best = match best {
            None => {
                // A lone element must still be comparable.
                compare(function, item, item)?;
                Some(item)
            }
            Some(b) if compare(function, item, b)? == prefer => Some(item),
            keep => keep,
        };
    }
    best.cloned().ok_or_else(|| {
        ExecutionError::function_error(function, format!("{function} called on empty list"))
    })
}

/// `list.sum()`: of ints, uints, doubles or durations; an empty list sums to 0.
fn sum(list: &Value) -> Result<Value, ExecutionError> {
    let items = list_items("sum", list)?;
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let Some(first) = items.first() else {
        return Ok(Value::Int(0));
    };
    let mut total = first.clone();
    for item in &items[1..] {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(overflow)?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => {
                Value::Duration(a.checked_add(b).ok_or_else(overflow)?)
            }
            _ => return Err(no_overload("sum")),
        };
    }
    match total {
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Duration(_) => Ok(total),
        _ => Err(no_overload("sum")),
    }
}

fn regex(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern)
        .map_err(|e| ExecutionError::function_error(function, format!("Illegal regex: {e}")))
}

mod net;
mod url;

use net::*;
use url::*;

#[cfg(test)]
mod tests;
