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

// ---------------------------------------------------------------------------------------
// URLs (library.URLs over Go's net/url).

/// A URL as Go's `url.ParseRequestURI` accepts it (an absolute URI or an absolute path),
/// with the parts `url.Parse` gives the accessors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    scheme: String,
    /// `host[:port]`, as written (IPv6 literals in brackets).
    authority_host: String,
    /// The path, still escaped.
    path: String,
    /// What follows `?`, without it.
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

impl Url {
    /// Go's `url.ParseRequestURI` (the checks that matter), then `url.Parse`'s split of
    /// the fragment; errors read as Go's.
    pub fn parse(raw: &str) -> Result<Url, String> {
        let quoted = format!("parse {raw:?}");
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(format!(
                "{quoted}: net/url: invalid control character in URL"
            ));
        }
        if raw.is_empty() {
            return Err(format!("{quoted}: empty url"));
        }
        if raw == "*" {
            return Ok(Url {
                scheme: String::new(),
                authority_host: String::new(),
                path: "*".into(),
                query: String::new(),
            });
        }
        // The scheme: a letter, then letters, digits, '+', '-', '.', up to ':'.
        let (scheme, rest) =
            match raw.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c))) {
                Some(i) if raw.as_bytes()[i] == b':' => {
                    if i == 0 {
                        return Err(format!("{quoted}: missing protocol scheme"));
                    }
                    if !raw.as_bytes()[0].is_ascii_alphabetic() {
                        // Not a scheme: the whole is a path (and must start with '/').
                        ("", raw)
                    } else {
                        (&raw[..i], &raw[i + 1..])
                    }
                }
                _ => ("", raw),
            };
        let scheme = scheme.to_ascii_lowercase();
        // ParseRequestURI keeps a '#' in the path; Parse (whose parts the accessors
        // read) cuts the fragment first.
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, query.to_string()),
            None => (rest, String::new()),
        };
        if !rest.starts_with('/') {
            if !scheme.is_empty() {
                // An opaque URI ("mailto:x"): accepted as it is.
                return Ok(Url {
                    scheme,
                    authority_host: String::new(),
                    path: String::new(),
                    query,
                });
            }
            return Err(format!("{quoted}: invalid URI for request"));
        }
        let (authority, path) = if !scheme.is_empty() && rest.starts_with("//") {
            let after = &rest[2..];
            match after.find('/') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            }
        } else {
            ("", rest)
        };
        let host = match authority.rfind('@') {
            Some(i) => &authority[i + 1..],
            None => authority,
        };
        check_host(host).map_err(|e| format!("{quoted}: {e}"))?;
        check_escapes(path).map_err(|e| format!("{quoted}: {e}"))?;
        let path = path.split('#').next().unwrap_or_default().to_string();
        let query = query.split('#').next().unwrap_or_default().to_string();
        Ok(Url {
            scheme,
            authority_host: host.to_string(),
            path,
            query,
        })
    }

    fn scheme(&self) -> String {
        self.scheme.clone()
    }

    fn host(&self) -> String {
        self.authority_host.clone()
    }

    /// Go's `Hostname`: the host without the port, an IPv6 literal without brackets.
    fn hostname(&self) -> String {
        let host = &self.authority_host;
        if let Some(rest) = host.strip_prefix('[') {
            return rest.split(']').next().unwrap_or_default().to_string();
        }
        host.split(':').next().unwrap_or_default().to_string()
    }

    /// Go's `Port`: the digits after the host's last ':', if any.
    fn port(&self) -> String {
        let host = &self.authority_host;
        let after = match host.rfind(']') {
            Some(i) => &host[i + 1..],
            None => host.as_str(),
        };
        match after.rfind(':') {
            Some(i) => after[i + 1..].to_string(),
            None => String::new(),
        }
    }

    /// Go's `EscapedPath`: the path as written when it is validly escaped, else the
    /// unescaped path escaped again.
    fn escaped_path(&self) -> String {
        let keep = |c: u8| c.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&c);
        let valid = self
            .path
            .bytes()
            .all(|c| keep(c) || b"!'()*[]%".contains(&c));
        if valid {
            return self.path.clone();
        }
        let mut out = String::with_capacity(self.path.len());
        for b in unescape(&self.path, false).bytes() {
            if keep(b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// Go's `Query`: the query's `key=value` pairs, unescaped, values listed by key.
    fn query(&self) -> Value {
        let mut map: std::collections::HashMap<Key, Vec<Value>> = Default::default();
        for pair in self.query.split(['&']) {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(k), Ok(v)) = (unescape_query(k), unescape_query(v)) else {
                continue;
            };
            map.entry(Key::String(Arc::new(k)))
                .or_default()
                .push(Value::from(v));
        }
        Value::Map(Map::from(
            map.into_iter()
                .map(|(k, v)| (k, Value::List(Arc::new(v))))
                .collect::<std::collections::HashMap<Key, Value>>(),
        ))
    }
}

/// Go's host checks: a bracketed IPv6 literal, a port of digits, no characters a host
/// may not hold.
fn check_host(host: &str) -> Result<(), String> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err("missing ']' in host".into());
        };
        (&rest[..end], &rest[end + 1..])
    } else {
        match host.rfind(':') {
            Some(i) => (&host[..i], &host[i..]),
            None => (host, ""),
        }
    };
    let valid_port =
        port.is_empty() || port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit());
    if !valid_port {
        return Err(format!("invalid port {port:?} after host"));
    }
    check_escapes(name)?;
    if let Some(c) = name.chars().find(|&c| {
        !(c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c) || !c.is_ascii())
    }) {
        return Err(format!(
            "invalid character {:?} in host name",
            c.to_string()
        ));
    }
    Ok(())
}

/// Every '%' starts a two-digit hexadecimal escape.
fn check_escapes(s: &str) -> Result<(), String> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let escape = bytes.get(i + 1..i + 3);
            if !escape.is_some_and(|e| e.iter().all(u8::is_ascii_hexdigit)) {
                let end = (i + 3).min(bytes.len());
                return Err(format!(
                    "invalid URL escape {:?}",
                    String::from_utf8_lossy(&bytes[i..end])
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

fn unescape_query(s: &str) -> Result<String, String> {
    check_escapes(s)?;
    Ok(unescape(s, true))
}

/// `s` with its (valid) `%XX` escapes decoded, and `+` as a space in a query.
fn unescape(s: &str, query: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len()
                && bytes[i + 1..i + 3].iter().all(u8::is_ascii_hexdigit) =>
            {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 3;
            }
            b'+' if query => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn url_of<'a>(function: &str, value: &'a Value) -> Result<&'a Url, ExecutionError> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Url>().ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

// ---------------------------------------------------------------------------------------
// IP addresses and CIDRs (library.IP, library.CIDR over Go's net/netip).

const IP_TYPE: &str = "net.IP";
const CIDR_TYPE: &str = "net.CIDR";

/// An IP address, neither zoned nor IPv4-mapped IPv6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ip(IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE
    }
}

impl Ip {
    fn is_unspecified(&self) -> bool {
        self.0.is_unspecified()
    }

    fn is_loopback(&self) -> bool {
        self.0.is_loopback()
    }

    fn is_multicast(&self) -> bool {
        self.0.is_multicast()
    }

    /// 224.0.0.0/24, ff02::/16 (and the other link-local scopes, as Go tests them).
    fn is_link_local_multicast(&self) -> bool {
        match self.0 {
            IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
            IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
        }
    }

    /// 169.254.0.0/16, fe80::/10.
    fn is_link_local_unicast(&self) -> bool {
        match self.0 {
            IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
            IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
        }
    }

    /// Go's `IsGlobalUnicast`: none of the above, nor the IPv4 broadcast address.
    fn is_global_unicast(&self) -> bool {
        if self.0 == IpAddr::V4(Ipv4Addr::BROADCAST) {
            return false;
        }
        !(self.is_unspecified()
            || self.is_loopback()
            || self.is_multicast()
            || self.is_link_local_unicast())
    }
}

/// `netip.ParseAddr`, refusing zones and IPv4-mapped IPv6 addresses as library.IP does.
fn parse_ip(raw: &str) -> Result<Ip, ExecutionError> {
    let failed = |detail: String| ExecutionError::function_error("ip", detail);
    if raw.contains('%') {
        return Err(failed(format!(
            "IP address {raw:?} with zone value is not allowed"
        )));
    }
    let addr: IpAddr = raw.parse().map_err(|e| {
        failed(format!(
            "IP Address {raw:?} parse error during conversion from string: ParseAddr({raw:?}): {e}"
        ))
    })?;
    if let IpAddr::V6(v6) = addr
        && is_4in6(&v6)
    {
        return Err(failed(format!(
            "IPv4-mapped IPv6 address {raw:?} is not allowed"
        )));
    }
    Ok(Ip(addr))
}

fn is_4in6(v6: &Ipv6Addr) -> bool {
    v6.segments()[..6] == [0, 0, 0, 0, 0, 0xffff]
}

fn ip_of<'a>(function: &str, value: &'a Value) -> Result<&'a Ip, ExecutionError> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Ip>().ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

/// A prefix as `netip.ParsePrefix` gives it: the address as written, and the bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

impl Cidr {
    fn width(&self) -> u8 {
        if self.addr.is_ipv4() { 32 } else { 128 }
    }

    fn as_bits(addr: IpAddr) -> u128 {
        match addr {
            IpAddr::V4(v4) => u32::from(v4) as u128,
            IpAddr::V6(v6) => u128::from(v6),
        }
    }

    fn mask(&self) -> u128 {
        let width = self.width() as u32;
        let host = width - self.bits as u32;
        let all = if width == 128 {
            u128::MAX
        } else {
            (1u128 << width) - 1
        };
        if host == 0 {
            all
        } else {
            all & !((1u128 << host) - 1)
        }
    }

    /// Go's `Prefix.Contains`: same family, same network bits.
    fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && Self::as_bits(ip) & self.mask() == Self::as_bits(self.addr) & self.mask()
    }

    /// library.CIDR's `containsCIDR`: `Overlaps(other) && Bits() <= other.Bits()`, the
    /// overlap of two prefixes being containment of the shorter's network bits.
    fn contains_cidr(&self, other: &Cidr) -> bool {
        if self.addr.is_ipv4() != other.addr.is_ipv4() || self.bits > other.bits {
            return false;
        }
        let shorter = self.mask();
        Self::as_bits(self.addr) & shorter == Self::as_bits(other.addr) & shorter
    }

    fn masked(&self) -> Cidr {
        let bits = Self::as_bits(self.addr) & self.mask();
        let addr = match self.addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(bits as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits)),
        };
        Cidr {
            addr,
            bits: self.bits,
        }
    }
}

/// `netip.ParsePrefix`, refusing IPv4-mapped IPv6 addresses as library.CIDR does.
fn parse_cidr(raw: &str) -> Result<Cidr, ExecutionError> {
    let failed = |detail: String| {
        ExecutionError::function_error(
            "cidr",
            format!(
                "network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix({raw:?}): {detail}"
            ),
        )
    };
    let Some((addr, bits)) = raw.rsplit_once('/') else {
        return Err(failed("no '/'".into()));
    };
    if addr.contains('%') {
        return Err(failed("IPv6 zones cannot be present in a prefix".into()));
    }
    let addr: IpAddr = addr
        .parse()
        .map_err(|e| failed(format!("ParseAddr({addr:?}): {e}")))?;
    let width = if addr.is_ipv4() { 32 } else { 128 };
    let valid_digits = !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0'));
    let bits: u8 = match bits.parse() {
        Ok(b) if valid_digits && b <= width => b,
        _ => return Err(failed(format!("bad bits after slash: {bits:?}"))),
    };
    if let IpAddr::V6(v6) = addr
        && is_4in6(&v6)
    {
        return Err(ExecutionError::function_error(
            "cidr",
            format!(
                "network address parse error during conversion from string: IPv4-mapped IPv6 address {raw:?} is not allowed"
            ),
        ));
    }
    Ok(Cidr { addr, bits })
}

fn cidr_of<'a>(function: &str, value: &'a Value) -> Result<&'a Cidr, ExecutionError> {
    match value {
        Value::Opaque(o) => o
            .downcast_ref::<Cidr>()
            .ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::cel::Selector;
    use gantry_api::dra::Device;
    use gantry_api::{Release, Sym};

    /// The verdict of `expression` at release `minor` on a device with nothing on it.
    fn eval_at(minor: u8, expression: &str) -> Result<bool, String> {
        let device = Device {
            name: Sym::new("d"),
            attributes: Vec::new(),
            capacity: Vec::new(),
        };
        Selector::compile_for(expression, Release::at(minor))?
            .matches(Sym::new("d.example.com"), &device)
    }

    fn eval(expression: &str) -> Result<bool, String> {
        eval_at(35, expression)
    }

    /// Each expression is true; each error case fails at evaluation, its error
    /// containing the text given.
    fn table(valid: &[&str], errors: &[(&str, &str)]) {
        for expression in valid {
            assert_eq!(eval(expression), Ok(true), "{expression}");
        }
        for (expression, text) in errors {
            match eval(expression) {
                Err(e) => assert!(e.contains(text), "{expression}: {e}"),
                Ok(v) => panic!("{expression}: {v}, not an error containing {text:?}"),
            }
        }
    }

    /// The bug of issue 33: standard `matches()` and the strings extension compiled, then
    /// failed at evaluation ("Undeclared reference"), leaving the pod pending.
    #[test]
    fn standard_matches_and_kubernetes_strings_evaluate() {
        table(
            &[
                "device.driver.matches('^d\\\\.example\\\\.com$')",
                "!'abc'.matches('^b')",
                "'ABC'.lowerAscii() == 'abc'",
                "device.driver.upperAscii().startsWith('D.EXAMPLE')",
                "duration('1h') > duration('59m')",
                "timestamp('2024-01-01T00:00:00Z').getFullYear() == 2024",
            ],
            &[("'abc'.matches('[')", "not a valid regex")],
        );
    }

    /// cel-go's `ext/strings_test.go` (version 2, as Kubernetes' base environment has it).
    #[test]
    fn strings_extension() {
        table(
            &[
                "'tacocat'.charAt(3) == 'o'",
                "'tacocat'.charAt(7) == ''",
                "'©αT'.charAt(0) == '©' && '©αT'.charAt(1) == 'α' && '©αT'.charAt(2) == 'T'",
                "'tacocat'.indexOf('') == 0",
                "'tacocat'.indexOf('ac') == 1",
                "'tacocat'.indexOf('none') == -1",
                "'tacocat'.indexOf('', 3) == 3",
                "'tacocat'.indexOf('a', 3) == 5",
                "'ta©o©αT'.indexOf('©', 3) == 4",
                "'tacocat'.lastIndexOf('') == 7",
                "'tacocat'.lastIndexOf('at') == 5",
                "'tacocat'.lastIndexOf('none') == -1",
                "'tacocat'.lastIndexOf('a', 3) == 1",
                "'TacoCat'.lowerAscii() == 'tacocat'",
                "'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'",
                "'TacoCat'.upperAscii() == 'TACOCAT'",
                "'12 days 12 hours'.replace('{0}', '2') == '12 days 12 hours'",
                "'{0} days {0} hours'.replace('{0}', '2') == '2 days 2 hours'",
                "'{0} days {0} hours'.replace('{0}', '2', 1).replace('{0}', '23') == '2 days 23 hours'",
                "'hello world'.split(' ') == ['hello', 'world']",
                "'hello world events!'.split(' ', 0) == []",
                "'hello world events!'.split(' ', 1) == ['hello world events!']",
                "'o©o©o©o'.split('©', -1) == ['o', 'o', 'o', 'o']",
                "'tacocat'.substring(4) == 'cat'",
                "'tacocat'.substring(0, 4) == 'taco'",
                "'ta©o©αT'.substring(2, 6) == '©o©α'",
                "' \\ttrim\\n    '.trim() == 'trim'",
                "['x', 'y'].join() == 'xy'",
                "['x', 'y'].join('-') == 'x-y'",
                "[].join() == ''",
                "strings.quote('first\\nsecond') == '\"first\\\\nsecond\"'",
                "'%d %s'.format([1, 'a']) == '1 a'",
            ],
            &[
                ("'tacocat'.charAt(30) == ''", "index out of range: 30"),
                ("'tacocat'.indexOf('a', 30) == -1", "index out of range: 30"),
                (
                    "'tacocat'.lastIndexOf('a', -1) == -1",
                    "index out of range: -1",
                ),
                ("'tacocat'.substring(40) == 'cat'", "index out of range: 40"),
                ("'tacocat'.substring(3, 1) == ''", "invalid substring range"),
            ],
        );
    }

    /// Kubernetes' `library/lists.go` (`isSorted`, `sum`, `min`, `max`, `indexOf`,
    /// `lastIndexOf`), as `apiextensions-apiserver/pkg/apiserver/schema/cel/
    /// validation_test.go`'s "lists" rows use them.
    #[test]
    fn kubernetes_lists() {
        table(
            &[
                "[1, 2, 3].isSorted()",
                "![3, 2, 1].isSorted()",
                "['a', 'b', 'b', 'c'].isSorted()",
                "[].isSorted()",
                "[1.0, 2.0].isSorted()",
                "[1, 2, 3].sum() == 6",
                "[1.5, 2.5].sum() == 4.0",
                "[].sum() == 0",
                "[duration('1s'), duration('2s')].sum() == duration('3s')",
                "[1, 2, 3].min() == 1",
                "[1, 2, 3].max() == 3",
                "['b', 'a', 'c'].min() == 'a'",
                "[1.5].max() == 1.5",
                "[1, 2, 3, 2].indexOf(2) == 1",
                "[1, 2, 3, 2].lastIndexOf(2) == 3",
                "['a', 'b'].indexOf('c') == -1",
                "[[1], [2]].indexOf([2]) == 1",
                // The string functions of the same name are not shadowed.
                "'abcb'.indexOf('b') == 1 && 'abcb'.lastIndexOf('b') == 3",
            ],
            &[
                ("[].min() == 0", "min called on empty list"),
                ("[].max() == 0", "max called on empty list"),
                ("['a'].sum() == 'a'", "no such overload"),
                ("[1, 'a'].max() == 1", "no such overload"),
            ],
        );
    }

    /// Kubernetes' `library/regex.go` (`find`, `findAll`).
    #[test]
    fn kubernetes_regex() {
        table(
            &[
                "'abc 123'.find('[0-9]+') == '123'",
                "'abc'.find('[0-9]+') == ''",
                "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
                "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
                "'123 abc 456'.findAll('[0-9]+', 0) == []",
                "'abc'.findAll('[0-9]+') == []",
            ],
            &[
                ("'abc'.find('[') == ''", "Illegal regex"),
                ("'abc'.findAll('[') == []", "Illegal regex"),
            ],
        );
    }

    /// Kubernetes' `library/urls.go` over Go's `net/url`.
    #[test]
    fn kubernetes_urls() {
        table(
            &[
                "isURL('https://example.com/path')",
                "isURL('/absolute-path')",
                "!isURL('../relative-path')",
                "!isURL('')",
                "!isURL('https://example.com:port/')",
                "url('https://example.com:80/path').getScheme() == 'https'",
                "url('https://example.com:80/path').getHost() == 'example.com:80'",
                "url('https://example.com:80/path').getHostname() == 'example.com'",
                "url('https://example.com:80/path').getPort() == '80'",
                "url('https://example.com/path').getPort() == ''",
                "url('https://[::1]:80/path').getHostname() == '::1'",
                "url('https://[::1]:80/path').getHost() == '[::1]:80'",
                "url('https://user:pass@example.com/').getHost() == 'example.com'",
                "url('https://example.com/with space/').getEscapedPath() == '/with%20space/'",
                "url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'",
                "url('https://example.com').getEscapedPath() == ''",
                "url('/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
                "url('https://example.com/?k=a+b%21').getQuery()['k'] == ['a b!']",
                "url('HTTPS://example.com/').getScheme() == 'https'",
            ],
            &[
                (
                    "url('../relative-path').getScheme() == ''",
                    "invalid URI for request",
                ),
                (
                    "url('https://ex ample.com/').getHost() == ''",
                    "invalid character",
                ),
                (
                    "url('https://example.com/%zz').getHost() == ''",
                    "invalid URL escape",
                ),
            ],
        );
    }

    /// Kubernetes' `library/ip_test.go` (the rows whose result Gantry can state; `type(..)
    /// == net.IP` and the compile-time overload check are not modelled).
    #[test]
    fn kubernetes_ips() {
        table(
            &[
                "string(ip('192.168.0.1')) == '192.168.0.1'",
                "ip('192.168.0.1') == ip('192.168.0.1')",
                "isIP('192.168.0.1')",
                "!isIP('192.168.0.1.0')",
                "ip.isCanonical('127.0.0.1')",
                "ip('192.168.0.1').family() == 4",
                "ip('0.0.0.0').isUnspecified()",
                "!ip('127.0.0.1').isUnspecified()",
                "ip('127.0.0.1').isLoopback()",
                "!ip('1.2.3.4').isLoopback()",
                "ip('224.0.0.1').isLinkLocalMulticast()",
                "!ip('224.0.1.1').isLinkLocalMulticast()",
                "ip('169.254.169.254').isLinkLocalUnicast()",
                "!ip('192.168.0.1').isLinkLocalUnicast()",
                "ip('192.168.0.1').isGlobalUnicast()",
                "!ip('255.255.255.255').isGlobalUnicast()",
                "string(ip('2001:db8::68')) == '2001:db8::68'",
                "isIP('2001:db8::68')",
                "!isIP('2001:db8:::68')",
                "ip.isCanonical('2001:db8::68')",
                "!ip.isCanonical('2001:DB8::68')",
                "ip('2001:db8::68').family() == 6",
                "ip('::').isUnspecified()",
                "!ip('::1').isUnspecified()",
                "ip('::1').isLoopback()",
                "!ip('2001:db8::abcd').isLoopback()",
                "ip('ff02::1').isLinkLocalMulticast()",
                "!ip('fd00::1').isLinkLocalMulticast()",
                "ip('fe80::1').isLinkLocalUnicast()",
                "!ip('fd80::1').isLinkLocalUnicast()",
                "ip('2001:db8::abcd').isGlobalUnicast()",
                "!ip('ff00::1').isGlobalUnicast()",
                "!isIP('::ffff:1.2.3.4')",
                "!isIP('fe80::1%eth0')",
                "!isIP('01.2.3.4')",
            ],
            &[
                (
                    "ip('192.168.0.1.0') == ip('1.2.3.4')",
                    "parse error during conversion from string",
                ),
                (
                    "ip.isCanonical('127.0.0.1.0')",
                    "parse error during conversion from string",
                ),
                (
                    "ip('2001:db8:::68') == ip('::1')",
                    "parse error during conversion from string",
                ),
                (
                    "ip('::ffff:1.2.3.4') == ip('::1')",
                    "IPv4-mapped IPv6 address",
                ),
            ],
        );
    }

    /// Kubernetes' `library/cidr_test.go` (as for IPs: `type(..) == net.CIDR` aside).
    #[test]
    fn kubernetes_cidrs() {
        table(
            &[
                "isCIDR('192.168.0.0/24')",
                "!isCIDR('192.168.0.0/')",
                "!isCIDR('192.168.0.0/33')",
                "!isCIDR('192.168.0.0/024')",
                "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
                "!cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
                "cidr('192.168.0.0/24').containsIP('192.168.0.1')",
                "!cidr('192.168.0.0/24').containsIP('192.168.1.1')",
                "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))",
                "!cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))",
                "cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25')",
                "!cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')",
                "cidr('192.168.0.0/24').ip() == ip('192.168.0.0')",
                "cidr('192.168.0.0/24').masked() == cidr('192.168.0.0/24')",
                "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
                "cidr('192.168.0.0/24').prefixLength() == 24",
                "cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))",
                "!cidr('2001:db8::/32').containsIP(ip('2001:dc8::1'))",
                "cidr('2001:db8::/32').containsIP('2001:db8::1')",
                "!cidr('2001:db8::/32').containsIP('2001:dc8::1')",
                "cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/33'))",
                "!cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/31'))",
                "cidr('2001:db8::/32').containsCIDR('2001:db8::/33')",
                "!cidr('2001:db8::/32').containsCIDR('2001:db8::/31')",
                "cidr('2001:db8::/32').ip() == ip('2001:db8::')",
                "cidr('2001:db8::/32').masked() == cidr('2001:db8::/32')",
                "cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32')",
                "cidr('2001:db8::/32').prefixLength() == 32",
                "string(cidr('192.168.0.0/24')) == '192.168.0.0/24'",
                "!cidr('192.168.0.0/24').containsIP('2001:db8::1')",
            ],
            &[
                (
                    "cidr('192.168.0.0/') == cidr('1.0.0.0/8')",
                    "bad bits after slash: \"\"",
                ),
                (
                    "cidr('2001:db8::/') == cidr('::/0')",
                    "bad bits after slash: \"\"",
                ),
            ],
        );
    }

    /// cel-go's `ext/sets_test.go`.
    #[test]
    fn sets_extension() {
        table(
            &[
                "sets.contains([], [])",
                "sets.contains([1, 2, 3, 4], [2, 3])",
                "!sets.contains([1, 2, 3], [4])",
                "sets.contains([[1], [2, 3]], [[2, 3]])",
                "sets.equivalent([1, 2, 3], [3, 2, 1])",
                "sets.equivalent([1, 1], [1])",
                "!sets.equivalent([1, 2], [1, 2, 3])",
                "sets.intersects([1, 2], [2, 3])",
                "!sets.intersects([], [])",
                "!sets.intersects([1], [2])",
            ],
            &[],
        );
    }

    /// Kubernetes' `library/quantity_test.go` (the functions Gantry has).
    #[test]
    fn kubernetes_quantities() {
        table(
            &[
                "isQuantity('1Gi')",
                "!isQuantity('1GiB')",
                "quantity('1Gi').sign() == 1",
                "quantity('0').sign() == 0",
                "quantity('-1').sign() == -1",
                "quantity('1').isInteger()",
                "!quantity('1500m').isInteger()",
                "quantity('1500m').asApproximateFloat() == 1.5",
                "quantity('50k').asInteger() == 50000",
                "quantity('1Gi') == quantity('1024Mi')",
                "quantity('1Gi').isGreaterThan(quantity('1000Mi'))",
            ],
            &[("quantity('1GiB') == quantity('1Gi')", "quantity")],
        );
    }

    /// cel-go's `ext/bindings_test.go`, from v1.31 (DRA's environment); `ext.Lists`
    /// from v1.34.
    #[test]
    fn bindings_and_lists_extension() {
        table(
            &[
                "cel.bind(a, 'hell' + 'o', a + a + a) == 'hellohellohello'",
                "cel.bind(x, [1, 2], cel.bind(y, x + [3], y.size() == 3))",
                "[1, 2, 3, 4].slice(1, 3) == [2, 3]",
                "[1, [2, [3]]].flatten() == [1, 2, [3]]",
                "[1, 2, 2, 1].distinct() == [1, 2]",
                "[3, 1, 2].sort() == [1, 2, 3]",
                "[1, 2].reverse() == [2, 1]",
                "lists.range(3) == [0, 1, 2]",
            ],
            &[],
        );
        assert!(eval_at(30, "cel.bind(a, 1, a == 1)").is_err());
        assert!(eval_at(33, "[3, 1].sort() == [1, 3]").is_err());
    }

    /// A function the release does not have is refused when the selector is compiled,
    /// with cel-go's message, not found missing when a device is evaluated.
    #[test]
    fn undeclared_functions_are_refused_at_compile_time() {
        let refused = |minor: u8, expression: &str| {
            Selector::compile_for(expression, Release::at(minor))
                .err()
                .unwrap_or_else(|| panic!("{expression} compiled at 1.{minor}"))
        };
        assert_eq!(
            refused(35, "device.driver.noSuchFunction()"),
            "Invalid value: compilation failed: ERROR: <input>:1:29: undeclared reference to 'noSuchFunction' (in container '')"
        );
        assert!(
            refused(35, "format.dns1123Label().validate('a') == optional.none()")
                .contains("undeclared reference to '")
        );
        assert!(refused(35, "quantity('1').add(2) == quantity('3')").contains("'add'"));
        // Introduced later than the release.
        for (minor, expression) in [
            (28, "strings.quote('a') == '\"a\"'"),
            (28, "sets.contains([1], [1])"),
            (29, "isIP('1.2.3.4')"),
            (29, "cidr('10.0.0.0/8').prefixLength() == 8"),
            (30, "semver('1.0.0').major() == 1"),
            (33, "lists.range(2) == [0, 1]"),
        ] {
            assert!(
                refused(minor, expression).contains("undeclared reference"),
                "{expression} at 1.{minor}"
            );
            assert!(eval_at(35, expression).unwrap(), "{expression} at 1.35");
        }
        // What each release has compiles there.
        assert_eq!(
            eval_at(28, "'A'.lowerAscii() == 'a' && 'a'.matches('a')"),
            Ok(true)
        );
        assert_eq!(eval_at(30, "ip('::1').isLoopback()"), Ok(true));
        assert_eq!(eval_at(31, "semver('1.0.0').major() == 1"), Ok(true));
    }

    /// Every function the table declares is implemented at the newest release: called
    /// globally or on a string, a list or a map, one of the calls reaches it (fails
    /// otherwise than as an undeclared reference).
    #[test]
    fn every_declared_function_is_implemented() {
        let undeclared = |e: &str| e.to_ascii_lowercase().contains("undeclared reference");
        for (_, names) in super::FUNCTIONS {
            for name in *names {
                let mut calls = vec![format!("{name}() == 1"), format!("{name}('a') == 1")];
                if !name.contains('.') {
                    for receiver in ["'a'", "[1]", "{'a': 1}", "1", "optional.of(1)"] {
                        calls.push(format!("{receiver}.{name}() == 1"));
                        calls.push(format!("{receiver}.{name}(1) == 1"));
                    }
                }
                assert!(
                    calls.iter().any(|call| eval(call).is_ok_and(|_| true)
                        || !undeclared(&eval(call).unwrap_err())),
                    "{name} is declared but not implemented"
                );
            }
        }
    }
}
