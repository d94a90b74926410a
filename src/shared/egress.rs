//! Egress allow-lists: IPv4 CIDRs and the sandbox's egress policy read from the API's
//! `egress_whitelist`, one rule for the daemon (which enforces it) and the CLI (which can check
//! a list before sending it). Own code rather than a CIDR crate: the rules are the contract's
//! (no host bits, IPv4 only, a bare address is /32) and the type is a few lines.
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// Most CIDRs one egress allow-list may hold (bounds the size of one nft transaction).
pub const MAX_ALLOW_ENTRIES: usize = 1024;

/// Link-local range (cloud metadata services): refused to every sandbox, whatever its list.
pub const LINK_LOCAL: Ipv4Net = Ipv4Net {
    addr: Ipv4Addr::new(169, 254, 0, 0),
    prefix_len: 16,
};

/// Destinations no sandbox reaches whatever its list or the admin's `egressDeny` say (besides
/// the sandbox pool itself): "this network", link-local (metadata services), multicast and the
/// reserved and broadcast block.
pub const ALWAYS_DENIED: [Ipv4Net; 4] = [
    Ipv4Net {
        addr: Ipv4Addr::new(0, 0, 0, 0),
        prefix_len: 8,
    },
    LINK_LOCAL,
    Ipv4Net {
        addr: Ipv4Addr::new(224, 0, 0, 0),
        prefix_len: 4,
    },
    Ipv4Net {
        addr: Ipv4Addr::new(240, 0, 0, 0),
        prefix_len: 4,
    },
];

/// The admin's `egressDeny` when it is not set: the private ranges of RFC 1918, shared address
/// space (RFC 6598, carrier-grade NAT and many clusters' node networks), link-local and Azure's
/// platform address (168.63.129.16: its wire server and DNS). With it, an unrestricted sandbox
/// reaches the internet, not the network the host sits on.
pub const DEFAULT_EGRESS_DENY: [&str; 6] = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "168.63.129.16/32",
];

/// An IPv4 network in CIDR notation; the host bits are always zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Net {
    addr: Ipv4Addr,
    prefix_len: u8,
}

impl Ipv4Net {
    /// The network `addr/prefix_len`; refuses a length over 32 and an address with host bits.
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> Result<Self, String> {
        if prefix_len > 32 {
            return Err(format!("prefix length {prefix_len} is over 32"));
        }
        let net = Self { addr, prefix_len };
        let network = Ipv4Addr::from(u32::from(addr) & net.netmask());
        if network != addr {
            return Err(format!(
                "has host bits set (the network would be {network}/{prefix_len})"
            ));
        }
        Ok(net)
    }

    /// First address of the network.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// Number of leading one bits of the mask.
    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// The mask as an integer (`/24` = `0xffff_ff00`).
    pub fn netmask(&self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len))
            .unwrap_or(0)
    }

    /// Number of addresses in the network.
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix_len))
    }

    /// Whether `ip` lies in the network.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.netmask() == u32::from(self.addr)
    }

    /// Whether every address of `other` lies in this network.
    pub fn covers(&self, other: &Ipv4Net) -> bool {
        self.prefix_len <= other.prefix_len && self.contains(other.addr)
    }

    /// Whether the two networks share an address (CIDRs either nest or are disjoint).
    pub fn overlaps(&self, other: &Ipv4Net) -> bool {
        self.covers(other) || other.covers(self)
    }
}

impl FromStr for Ipv4Net {
    type Err = String;

    /// `a.b.c.d/len`, or a bare `a.b.c.d` meaning `/32`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, len) = match s.split_once('/') {
            Some((addr, len)) => (addr, Some(len)),
            None => (s, None),
        };
        if addr.contains(':') {
            return Err("IPv6 is not supported (sandboxes are IPv4-only)".to_owned());
        }
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
        let prefix_len = match len {
            None => 32,
            Some(len) => {
                let canonical = !len.is_empty()
                    && len.len() <= 2
                    && len.bytes().all(|b| b.is_ascii_digit())
                    && !(len.len() > 1 && len.starts_with('0'));
                match len.parse::<u8>() {
                    Ok(n) if canonical => n,
                    _ => return Err(format!("{len:?} is not a prefix length")),
                }
            }
        };
        Ipv4Net::new(addr, prefix_len)
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// What no sandbox reaches on either platform, whatever its list says: the admin's
/// `egressDeny` (`configured`; None = [`DEFAULT_EGRESS_DENY`]) and [`ALWAYS_DENIED`], without
/// the networks another covers. The error names the bad entry.
pub fn denied_ranges(configured: Option<&[String]>) -> Result<Vec<Ipv4Net>, String> {
    let parse = |entry: &str| {
        entry
            .parse::<Ipv4Net>()
            .map_err(|why| format!("egressDeny entry {entry:?} is not an IPv4 CIDR: {why}"))
    };
    let admin: Vec<Ipv4Net> = match configured {
        Some(list) => list.iter().map(|e| parse(e)).collect::<Result<_, _>>()?,
        None => DEFAULT_EGRESS_DENY
            .iter()
            .map(|e| parse(e))
            .collect::<Result<_, _>>()?,
    };
    Ok(normalize(admin.into_iter().chain(ALWAYS_DENIED).collect()))
}

/// Most CIDRs a tenant's `limits.network.egressDeny` may hold.
pub const MAX_TENANT_DENY_ENTRIES: usize = 256;

/// A tenant's own deny list (`spec.limits.egressDeny`, set by an admin), added to the
/// daemon's for that tenant's sandboxes. The error is a 400 message naming the bad entry.
pub fn tenant_denied_ranges(list: &[String]) -> Result<Vec<Ipv4Net>, String> {
    if list.len() > MAX_TENANT_DENY_ENTRIES {
        return Err(format!(
            "limits.egressDeny has {} entries; at most {MAX_TENANT_DENY_ENTRIES} are allowed",
            list.len()
        ));
    }
    let nets = list
        .iter()
        .map(|entry| {
            entry.parse::<Ipv4Net>().map_err(|why| {
                format!("limits.egressDeny entry {entry:?} is not an IPv4 CIDR: {why}")
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(normalize(nets))
}

/// `nets` without any address of `deny`: each network that holds part of a denied one is
/// split into the halves around it, down to the denied network's size. As the networks of a
/// normalized list are disjoint, each denied network splits at most one of them, into at most
/// 32 pieces.
pub fn subtract(nets: &[Ipv4Net], deny: &[Ipv4Net]) -> Vec<Ipv4Net> {
    let mut out = Vec::new();
    let mut todo: Vec<Ipv4Net> = nets.iter().rev().copied().collect();
    while let Some(net) = todo.pop() {
        if deny.iter().any(|d| d.covers(&net)) {
            continue;
        }
        if !deny.iter().any(|d| net.covers(d)) {
            out.push(net);
            continue;
        }
        // A denied network lies strictly inside: keep looking in each half (a /32 is covered
        // or disjoint, so the split always has a bit to take).
        let len = net.prefix_len + 1;
        let upper = Ipv4Addr::from(u32::from(net.addr) | (1u32 << (32 - u32::from(len))));
        todo.push(Ipv4Net {
            addr: upper,
            prefix_len: len,
        });
        todo.push(Ipv4Net {
            addr: net.addr,
            prefix_len: len,
        });
    }
    normalize(out)
}

/// A sandbox's egress policy (the API's `egress_whitelist`). Whatever it says, the enforcing
/// side refuses the host, the other sandboxes, [`ALWAYS_DENIED`] and the admin's deny list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Egress {
    /// Absent or null whitelist: the internet (anything but the refused ranges above).
    Unrestricted,
    /// `[]`: nothing at all, DNS included.
    DenyAll,
    /// Only these networks, plus DNS to the configured resolvers.
    Allow(Vec<Ipv4Net>),
}

impl Egress {
    /// Reads the API field; the error is a 400 message naming the bad entry. Entries are IPv4
    /// CIDRs (a bare address means /32) with zero host bits; networks covered by another entry
    /// are dropped.
    pub fn from_whitelist(list: Option<&[String]>) -> Result<Egress, String> {
        let Some(list) = list else {
            return Ok(Egress::Unrestricted);
        };
        if list.is_empty() {
            return Ok(Egress::DenyAll);
        }
        if list.len() > MAX_ALLOW_ENTRIES {
            return Err(format!(
                "egress_whitelist has {} entries; at most {MAX_ALLOW_ENTRIES} are allowed",
                list.len()
            ));
        }
        let nets = list
            .iter()
            .map(|entry| {
                entry.parse::<Ipv4Net>().map_err(|why| {
                    format!("egress_whitelist entry {entry:?} is not a valid IPv4 CIDR: {why}")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Egress::Allow(normalize(nets)))
    }

    /// The policy without the addresses of `deny` (a tenant's own deny list): no list becomes
    /// the internet minus those networks, a list loses what they cover; `[]` stays nothing.
    pub fn without(self, deny: &[Ipv4Net]) -> Egress {
        if deny.is_empty() {
            return self;
        }
        let internet = [Ipv4Net {
            addr: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
        }];
        match self {
            Egress::DenyAll => Egress::DenyAll,
            Egress::Unrestricted => Egress::Allow(subtract(&internet, deny)),
            Egress::Allow(nets) => Egress::Allow(subtract(&nets, deny)),
        }
    }

    /// The API form back: None, `[]` or the CIDR strings.
    pub fn to_whitelist(&self) -> Option<Vec<String>> {
        match self {
            Egress::Unrestricted => None,
            Egress::DenyAll => Some(Vec::new()),
            Egress::Allow(nets) => Some(nets.iter().map(ToString::to_string).collect()),
        }
    }
}

/// Sorts the networks and drops those another entry covers, leaving disjoint intervals (an nft
/// interval set refuses overlapping elements).
pub fn normalize(mut nets: Vec<Ipv4Net>) -> Vec<Ipv4Net> {
    nets.sort_by_key(|n| (u32::from(n.addr), n.prefix_len));
    let mut out: Vec<Ipv4Net> = Vec::with_capacity(nets.len());
    for net in nets {
        // Sorted by address then breadth, a covering network is always the last one kept.
        if out.last().is_some_and(|last| last.covers(&net)) {
            continue;
        }
        out.push(net);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_parsing() {
        assert_eq!(net("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(net("1.2.3.4").to_string(), "1.2.3.4/32");
        assert_eq!(net("0.0.0.0/0").netmask(), 0);
        assert_eq!(net("0.0.0.0/0").size(), 1 << 32);
        assert_eq!(net("192.168.1.0/24").netmask(), 0xffff_ff00);
        assert_eq!(net("1.2.3.4/32").netmask(), u32::MAX);
        for bad in [
            "",
            "/8",
            "10.0.0.0/",
            "10.0.0.0/33",
            "10.0.0.0/08",
            "10.0.0.0/+8",
            "10.0.0/8",
            "10.0.0.0.0/8",
            "010.0.0.0/8",
            "10.0.0.1/8",
            "a.b.c.d/8",
            " 10.0.0.0/8",
            "::1/128",
            "10.0.0.0/8/8",
        ] {
            assert!(bad.parse::<Ipv4Net>().is_err(), "{bad:?} parsed");
        }
        let err = "10.1.2.3/8".parse::<Ipv4Net>().unwrap_err();
        assert!(err.contains("10.0.0.0/8"), "{err}");
        let err = "2001:db8::/32".parse::<Ipv4Net>().unwrap_err();
        assert!(err.contains("IPv6"), "{err}");
    }

    #[test]
    fn cidr_relations() {
        assert!(net("10.0.0.0/8").covers(&net("10.1.0.0/16")));
        assert!(!net("10.1.0.0/16").covers(&net("10.0.0.0/8")));
        assert!(net("10.1.0.0/16").overlaps(&net("10.0.0.0/8")));
        assert!(!net("10.0.0.0/8").overlaps(&net("11.0.0.0/8")));
        assert!(net("0.0.0.0/0").contains(Ipv4Addr::new(255, 255, 255, 255)));
        assert!(!net("10.0.0.0/8").contains(Ipv4Addr::new(11, 0, 0, 0)));
    }

    #[test]
    fn the_deny_list_is_the_setting_and_the_always_denied_ranges() {
        let strs = |nets: Vec<Ipv4Net>| nets.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            strs(denied_ranges(None).unwrap()),
            [
                "0.0.0.0/8",
                "10.0.0.0/8",
                "100.64.0.0/10",
                "168.63.129.16/32",
                "169.254.0.0/16",
                "172.16.0.0/12",
                "192.168.0.0/16",
                "224.0.0.0/4",
                "240.0.0.0/4",
            ]
        );
        // An admin's list replaces the default; link-local stays denied.
        let own = denied_ranges(Some(&["203.0.113.0/24".to_string()])).unwrap();
        assert!(own.contains(&net("203.0.113.0/24")));
        assert!(own.contains(&net("169.254.0.0/16")));
        assert!(!own.contains(&net("10.0.0.0/8")));
        for bad in ["10.0.0.1/8", "fd00::/8", "example.com"] {
            let err = denied_ranges(Some(&[bad.to_string()])).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn a_tenant_deny_list_is_taken_out_of_every_policy() {
        let deny = tenant_denied_ranges(&["203.0.113.0/24".into(), "8.8.8.8".into()]).unwrap();
        assert_eq!(deny, vec![net("8.8.8.8/32"), net("203.0.113.0/24")]);
        let Egress::Allow(internet) = Egress::Unrestricted.without(&deny) else {
            panic!("no list becomes a list");
        };
        // Every address but the denied ones, in disjoint pieces.
        let total: u64 = internet.iter().map(Ipv4Net::size).sum();
        assert_eq!(total, (1u64 << 32) - 256 - 1);
        for ip in [Ipv4Addr::new(8, 8, 8, 8), Ipv4Addr::new(203, 0, 113, 77)] {
            assert!(
                !internet.iter().any(|n| n.contains(ip)),
                "{ip} still allowed"
            );
        }
        for ip in [Ipv4Addr::new(8, 8, 8, 9), Ipv4Addr::new(203, 0, 114, 1)] {
            assert!(internet.iter().any(|n| n.contains(ip)), "{ip} lost");
        }
        assert!(internet.len() <= 64, "{internet:?}");
        let list = Egress::Allow(vec![
            net("1.1.1.1/32"),
            net("8.8.0.0/16"),
            net("203.0.113.128/25"),
        ]);
        let Egress::Allow(left) = list.without(&deny) else {
            panic!("a list stays a list");
        };
        assert_eq!(left[0], net("1.1.1.1/32"));
        let total: u64 = left.iter().map(Ipv4Net::size).sum();
        assert_eq!(total, 1 + 65536 - 1, "{left:?}");
        assert!(
            !left
                .iter()
                .any(|n| n.contains(Ipv4Addr::new(203, 0, 113, 200)))
        );
        assert_eq!(Egress::DenyAll.without(&deny), Egress::DenyAll);
        assert_eq!(Egress::Unrestricted.without(&[]), Egress::Unrestricted);
        assert_eq!(subtract(&[net("10.0.0.0/8")], &[net("10.0.0.0/8")]), vec![]);
        assert_eq!(
            subtract(&[net("10.0.0.0/30")], &[net("10.0.0.1/32")]),
            vec![net("10.0.0.0/32"), net("10.0.0.2/31")]
        );
        let too_many: Vec<String> = (0..=MAX_TENANT_DENY_ENTRIES)
            .map(|i| format!("10.0.{}.{}", i / 256, i % 256))
            .collect();
        assert!(
            tenant_denied_ranges(&too_many)
                .unwrap_err()
                .contains("at most")
        );
        let err = tenant_denied_ranges(&["10.0.0.1/8".into()]).unwrap_err();
        assert!(
            err.contains("egressDeny") && err.contains("10.0.0.1/8"),
            "{err}"
        );
    }

    #[test]
    fn whitelist_semantics() {
        assert_eq!(Egress::from_whitelist(None), Ok(Egress::Unrestricted));
        assert_eq!(Egress::from_whitelist(Some(&[])), Ok(Egress::DenyAll));
        let list: Vec<String> = [
            "10.1.0.0/16",
            "8.8.8.8",
            "10.0.0.0/8",
            "10.2.3.0/24",
            "8.8.8.8/32",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            Egress::from_whitelist(Some(&list)),
            Ok(Egress::Allow(vec![net("8.8.8.8/32"), net("10.0.0.0/8")]))
        );
        assert_eq!(
            Egress::Allow(vec![net("8.8.8.8/32")]).to_whitelist(),
            Some(vec!["8.8.8.8/32".to_owned()])
        );
        assert_eq!(Egress::DenyAll.to_whitelist(), Some(vec![]));
        assert_eq!(Egress::Unrestricted.to_whitelist(), None);
    }

    #[test]
    fn whitelist_errors_name_the_entry() {
        for (entry, hint) in [
            ("10.0.0.1/8", "host bits"),
            ("example.com", "not an IPv4 address"),
            ("10.0.0.0/40", "prefix length"),
            ("fd00::/8", "IPv6"),
            ("", "not an IPv4 address"),
        ] {
            let list = vec!["1.1.1.1/32".to_owned(), entry.to_owned()];
            let err = Egress::from_whitelist(Some(&list)).unwrap_err();
            assert!(err.contains(&format!("{entry:?}")), "{err}");
            assert!(err.contains(hint), "{err}");
        }
        let many: Vec<String> = (0..=MAX_ALLOW_ENTRIES)
            .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
            .collect();
        let err = Egress::from_whitelist(Some(&many)).unwrap_err();
        assert!(err.contains("at most"), "{err}");
    }

    #[test]
    fn normalize_keeps_disjoint_networks() {
        let out = normalize(vec![
            net("192.168.0.0/16"),
            net("10.0.0.128/25"),
            net("10.0.0.0/25"),
            net("192.168.5.0/24"),
            net("10.0.0.0/24"),
            net("172.16.0.1/32"),
        ]);
        assert_eq!(
            out,
            vec![
                net("10.0.0.0/24"),
                net("172.16.0.1/32"),
                net("192.168.0.0/16")
            ]
        );
        for (i, a) in out.iter().enumerate() {
            for b in &out[i + 1..] {
                assert!(!a.overlaps(b));
            }
        }
    }
}
