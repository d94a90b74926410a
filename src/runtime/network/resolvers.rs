//! The resolvers sandboxes get: the host's, read from /etc/resolv.conf (or, behind a local
//! stub such as systemd-resolved, the stub's upstream list).
use super::*;

/// Non-loopback IPv4 nameservers of the host; when /etc/resolv.conf names only a local stub
/// (systemd-resolved), the stub's upstream list.
pub(super) fn resolvers_from_host() -> Vec<Ipv4Addr> {
    let read = |path: &str| {
        fs::read_to_string(path)
            .map(|s| parse_resolv_conf(&s))
            .unwrap_or_default()
    };
    let found = read("/etc/resolv.conf");
    if found.is_empty() {
        read("/run/systemd/resolve/resolv.conf")
    } else {
        found
    }
}

pub(super) fn parse_resolv_conf(text: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("nameserver") {
            continue;
        }
        if let Some(Ok(ip)) = words.next().map(str::parse::<Ipv4Addr>)
            && !ip.is_loopback()
            && !ip.is_unspecified()
            && !out.contains(&ip)
        {
            out.push(ip);
        }
    }
    out
}
