//! IP addresses and CIDRs (library.IP, library.CIDR over Go's net/netip).

use super::*;

pub(super) const IP_TYPE: &str = "net.IP";
pub(super) const CIDR_TYPE: &str = "net.CIDR";

/// An IP address, neither zoned nor IPv4-mapped IPv6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ip(pub(super) IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE
    }
}

impl Ip {
    pub(super) fn is_unspecified(&self) -> bool {
        self.0.is_unspecified()
    }

    pub(super) fn is_loopback(&self) -> bool {
        self.0.is_loopback()
    }

    pub(super) fn is_multicast(&self) -> bool {
        self.0.is_multicast()
    }

    /// 224.0.0.0/24, ff02::/16 (and the other link-local scopes, as Go tests them).
    pub(super) fn is_link_local_multicast(&self) -> bool {
        match self.0 {
            IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
            IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
        }
    }

    /// 169.254.0.0/16, fe80::/10.
    pub(super) fn is_link_local_unicast(&self) -> bool {
        match self.0 {
            IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
            IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
        }
    }

    /// Go's `IsGlobalUnicast`: none of the above, nor the IPv4 broadcast address.
    pub(super) fn is_global_unicast(&self) -> bool {
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
pub(super) fn parse_ip(raw: &str) -> Result<Ip, ExecutionError> {
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

pub(super) fn is_4in6(v6: &Ipv6Addr) -> bool {
    v6.segments()[..6] == [0, 0, 0, 0, 0, 0xffff]
}

pub(super) fn ip_of<'a>(function: &str, value: &'a Value) -> Result<&'a Ip, ExecutionError> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Ip>().ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

/// A prefix as `netip.ParsePrefix` gives it: the address as written, and the bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidr {
    pub(super) addr: IpAddr,
    pub(super) bits: u8,
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
    pub(super) fn width(&self) -> u8 {
        if self.addr.is_ipv4() { 32 } else { 128 }
    }

    pub(super) fn as_bits(addr: IpAddr) -> u128 {
        match addr {
            IpAddr::V4(v4) => u32::from(v4) as u128,
            IpAddr::V6(v6) => u128::from(v6),
        }
    }

    pub(super) fn mask(&self) -> u128 {
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
    pub(super) fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && Self::as_bits(ip) & self.mask() == Self::as_bits(self.addr) & self.mask()
    }

    /// library.CIDR's `containsCIDR`: `Overlaps(other) && Bits() <= other.Bits()`, the
    /// overlap of two prefixes being containment of the shorter's network bits.
    pub(super) fn contains_cidr(&self, other: &Cidr) -> bool {
        if self.addr.is_ipv4() != other.addr.is_ipv4() || self.bits > other.bits {
            return false;
        }
        let shorter = self.mask();
        Self::as_bits(self.addr) & shorter == Self::as_bits(other.addr) & shorter
    }

    pub(super) fn masked(&self) -> Cidr {
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
pub(super) fn parse_cidr(raw: &str) -> Result<Cidr, ExecutionError> {
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

pub(super) fn cidr_of<'a>(function: &str, value: &'a Value) -> Result<&'a Cidr, ExecutionError> {
    match value {
        Value::Opaque(o) => o
            .downcast_ref::<Cidr>()
            .ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}
