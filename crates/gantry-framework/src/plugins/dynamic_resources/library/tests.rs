use super::super::cel::Selector;
use gantry_api::dra::Device;
use gantry_api::{Release, Sym};

/// The verdict of `expression` at release `minor` on a device with nothing on it.
fn eval_at(minor: u8, expression: &str) -> Result<bool, String> {
    let device = Device {
        binding: None,
        binds_to_node: false,
        name: Sym::new("d"),
        attributes: Vec::new(),
        capacity: Vec::new(),
        taints: Vec::new(),
        consumes_counters: Vec::new(),
        allow_multiple_allocations: false,
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
                calls
                    .iter()
                    .any(|call| eval(call).is_ok_and(|_| true)
                        || !undeclared(&eval(call).unwrap_err())),
                "{name} is declared but not implemented"
            );
        }
    }
}
