//! The nftables side of sandbox networks as pure functions: the per-sandbox scripts (attach,
//! policy change, removal) and the parsing of `nft -j` listings. Unit-tested without a kernel.
use super::*;

/// How refused packets are answered: TCP with a reset, the rest with ICMP "administratively
/// prohibited". Resets are not rate-limited; ICMP errors are (per destination, about one a
/// second after a burst of six), so with ICMP alone a sandbox that keeps hitting its policy
/// would soon see connects hang for a second instead of failing at once.
pub(super) const REJECT: [&str; 2] = [
    "meta l4proto tcp reject with tcp reset",
    "reject with icmpx admin-prohibited",
];

/// The two `add rule` lines that refuse what `matches` selects in `chain` (`{t}` = table).
pub(super) fn reject_rules(t: &str, chain: &str, matches: &str) -> [String; 2] {
    let sep = if matches.is_empty() { "" } else { " " };
    REJECT.map(|how| format!("add rule {t} {chain} {matches}{sep}{how}"))
}

pub(super) fn chain_name(slot: u32) -> String {
    format!("sb{slot}")
}

pub(super) fn set_name(slot: u32) -> String {
    format!("sb{slot}_allow")
}

pub(super) fn counter_name(slot: u32) -> String {
    format!("sb{slot}_tx")
}

pub(super) fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn lines_to_script(lines: Vec<String>) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// The sandbox's chain, set, counter and map entry. `fresh` is for attach: the objects are
/// created and the transaction fails (changing nothing) if any exists already. Otherwise a
/// policy change: the chain and set are flushed and refilled, and the transaction fails if the
/// sandbox is not attached. The chain holds the sandbox's own policy only: what no policy
/// opens (the pool, link-local, the admin's deny list) is refused before it, in
/// `from_sandbox`, so that a list cannot reach it.
pub(super) fn sandbox_script(att: &Attachment, egress: &Egress, fresh: bool) -> String {
    let t = format!("inet {NFT_TABLE}");
    let slot = att.slot;
    let (chain, set, counter) = (chain_name(slot), set_name(slot), counter_name(slot));
    let mut lines = Vec::new();
    if fresh {
        lines.push(format!("create chain {t} {chain}"));
        lines.push(format!(
            "create set {t} {set} {{ type ipv4_addr; flags interval; }}"
        ));
        lines.push(format!("create counter {t} {counter}"));
    } else {
        lines.push(format!("flush chain {t} {chain}"));
        lines.push(format!("flush set {t} {set}"));
    }
    let count = format!("counter name \"{counter}\" accept");
    let dns = format!("ip daddr @dns meta l4proto {{ tcp, udp }} th dport 53 {count}");
    lines.push(format!(
        "add rule {t} {chain} ip saddr != {} drop",
        att.address
    ));
    match egress {
        Egress::Unrestricted => {
            lines.push(format!("add rule {t} {chain} {dns}"));
            lines.push(format!("add rule {t} {chain} {count}"));
        }
        Egress::DenyAll => lines.extend(reject_rules(&t, &chain, "")),
        Egress::Allow(nets) => {
            let nets = normalize(nets.clone());
            if !nets.is_empty() {
                lines.push(format!("add element {t} {set} {{ {} }}", join(&nets)));
            }
            lines.push(format!("add rule {t} {chain} {dns}"));
            lines.push(format!("add rule {t} {chain} ip daddr @{set} {count}"));
            lines.extend(reject_rules(&t, &chain, ""));
        }
    }
    if fresh {
        lines.push(format!(
            "add element {t} egress {{ \"{}\" : jump {chain} }}",
            att.host_veth
        ));
    }
    lines_to_script(lines)
}

/// Deletes the nft objects of these slots. Every object is added first (a no-op when it
/// exists), so the transaction also succeeds when some are already gone.
pub(super) fn remove_script(slots: &[u32]) -> String {
    let t = format!("inet {NFT_TABLE}");
    let mut lines = vec![
        format!("add table {t}"),
        format!("add map {t} egress {{ type ifname : verdict; }}"),
    ];
    for &slot in slots {
        let (chain, set) = (chain_name(slot), set_name(slot));
        let (counter, veth) = (counter_name(slot), host_veth_name(slot));
        lines.extend([
            format!("add chain {t} {chain}"),
            format!("add set {t} {set} {{ type ipv4_addr; flags interval; }}"),
            format!("add counter {t} {counter}"),
            format!("add element {t} egress {{ \"{veth}\" : jump {chain} }}"),
            format!("delete element {t} egress {{ \"{veth}\" }}"),
            format!("flush chain {t} {chain}"),
            format!("delete chain {t} {chain}"),
            format!("delete set {t} {set}"),
            format!("delete counter {t} {counter}"),
        ]);
    }
    lines_to_script(lines)
}

/// Slots that own any object in a JSON listing of the table.
pub(super) fn nft_sandbox_slots(listing: &str) -> Result<BTreeSet<u32>, NetworkError> {
    let mut slots = BTreeSet::new();
    for item in nft_items(listing, "list table")? {
        let name = |kind: &str| item[kind]["name"].as_str().map(str::to_owned);
        if let Some(n) = name("chain") {
            slots.extend(parse_slot(&n, "sb", ""));
        } else if let Some(n) = name("set") {
            slots.extend(parse_slot(&n, "sb", "_allow"));
        } else if let Some(n) = name("counter") {
            slots.extend(parse_slot(&n, "sb", "_tx"));
        } else if name("map").as_deref() == Some("egress") {
            for elem in item["map"]["elem"].as_array().into_iter().flatten() {
                slots.extend(
                    elem[0]
                        .as_str()
                        .and_then(|n| parse_slot(n, HOST_VETH_PREFIX, "")),
                );
            }
        }
    }
    Ok(slots)
}

/// Byte counts of the per-sandbox counters in a JSON listing, by slot.
pub(super) fn veth_rx_bytes(listing: &str) -> Result<BTreeMap<u32, u64>, NetworkError> {
    let links: Vec<serde_json::Value> =
        serde_json::from_str(listing).map_err(|e| NetworkError::Output {
            command: "ip -j -s link show type veth".to_owned(),
            detail: e.to_string(),
        })?;
    Ok(links
        .iter()
        .filter_map(|link| {
            let slot = parse_slot(link["ifname"].as_str()?, HOST_VETH_PREFIX, "")?;
            let bytes = link["stats64"]["rx"]["bytes"].as_u64()?;
            Some((slot, bytes))
        })
        .collect())
}

pub(super) fn counters(listing: &str) -> Result<BTreeMap<u32, u64>, NetworkError> {
    let mut out = BTreeMap::new();
    for item in nft_items(listing, "list counters")? {
        let counter = &item["counter"];
        let Some(slot) = counter["name"]
            .as_str()
            .and_then(|n| parse_slot(n, "sb", "_tx"))
        else {
            continue;
        };
        let bytes = counter["bytes"]
            .as_u64()
            .ok_or_else(|| NetworkError::Output {
                command: "nft -j list counters".to_owned(),
                detail: format!("the counter of slot {slot} has no byte count"),
            })?;
        out.insert(slot, bytes);
    }
    Ok(out)
}

pub(super) fn nft_items(listing: &str, what: &str) -> Result<Vec<serde_json::Value>, NetworkError> {
    let bad = |detail: String| NetworkError::Output {
        command: format!("nft -j {what}"),
        detail,
    };
    let mut value: serde_json::Value =
        serde_json::from_str(listing).map_err(|e| bad(format!("not JSON: {e}")))?;
    match value.get_mut("nftables").map(serde_json::Value::take) {
        Some(serde_json::Value::Array(items)) => Ok(items),
        _ => Err(bad("no \"nftables\" array".to_owned())),
    }
}

/// The base ruleset (see the module documentation); safe to apply again. `deny` is what no
/// sandbox reaches (disjoint networks).
pub(super) fn base_script(
    pool: Ipv4Net,
    uplink: Option<&str>,
    dns: &[Ipv4Addr],
    deny: &[Ipv4Net],
) -> String {
    let t = format!("inet {NFT_TABLE}");
    let veths = format!("\"{HOST_VETH_PREFIX}*\"");
    let mut lines = vec![
        format!("add table {t}"),
        format!("add map {t} egress {{ type ifname : verdict; }}"),
        format!("add set {t} dns {{ type ipv4_addr; }}"),
        format!("flush set {t} dns"),
        format!("add set {t} deny {{ type ipv4_addr; flags interval; }}"),
        format!("flush set {t} deny"),
    ];
    if !dns.is_empty() {
        lines.push(format!("add element {t} dns {{ {} }}", join(dns)));
    }
    if !deny.is_empty() {
        lines.push(format!("add element {t} deny {{ {} }}", join(deny)));
    }
    lines.extend([
        format!(
            "add chain {t} forward {{ type filter hook forward priority filter; policy accept; }}"
        ),
        format!(
            "add chain {t} input {{ type filter hook input priority filter; policy accept; }}"
        ),
        format!(
            "add chain {t} postrouting {{ type nat hook postrouting priority srcnat; policy accept; }}"
        ),
        format!(
            "add chain {t} prerouting {{ type filter hook prerouting priority raw; policy accept; }}"
        ),
    ]);
    for chain in ["from_sandbox", "to_sandbox", "to_host"] {
        lines.push(format!("add chain {t} {chain}"));
    }
    for chain in [
        "forward",
        "input",
        "postrouting",
        "prerouting",
        "from_sandbox",
        "to_sandbox",
        "to_host",
    ] {
        lines.push(format!("flush chain {t} {chain}"));
    }
    // Strict reverse-path filtering on the sandboxes' links, before conntrack sees a packet: a
    // sandbox with NET_RAW could otherwise send as the internet host another sandbox talks
    // to, and its forged "reply" would pass as one (`ct direction reply accept`, de-NATed to
    // the other sandbox), its own chain's source check never reached.
    lines.push(format!(
        "add rule {t} prerouting iifname {veths} fib saddr . iif oif missing drop"
    ));
    // The destination is judged first: no verdict of the sender's chain can open another
    // sandbox (an `accept` there ends the forward hook).
    lines.extend([
        format!("add rule {t} forward oifname {veths} jump to_sandbox"),
        format!("add rule {t} forward iifname {veths} jump from_sandbox"),
        format!("add rule {t} input iifname {veths} jump to_host"),
        format!("add rule {t} from_sandbox ct direction reply accept"),
        format!(
            "add rule {t} from_sandbox meta nfproto != ipv4 {}",
            REJECT[1]
        ),
        format!(
            "add rule {t} from_sandbox ip daddr @dns meta l4proto {{ tcp, udp }} th dport 53 iifname vmap @egress"
        ),
    ]);
    lines.extend(reject_rules(&t, "from_sandbox", "ip daddr @deny"));
    lines.push(format!("add rule {t} from_sandbox iifname vmap @egress"));
    lines.extend(reject_rules(&t, "from_sandbox", ""));
    lines.push(format!(
        "add rule {t} to_sandbox ct state established,related return"
    ));
    // New connections from another sandbox are refused at once (its client fails fast, as
    // at its own policy); from anywhere else they are dropped without an answer.
    lines.extend(reject_rules(&t, "to_sandbox", &format!("iifname {veths}")));
    lines.extend([
        format!("add rule {t} to_sandbox drop"),
        format!("add rule {t} to_host ct direction reply accept"),
        format!("add rule {t} to_host meta nfproto != ipv4 {}", REJECT[1]),
        format!(
            "add rule {t} to_host ip daddr @dns meta l4proto {{ tcp, udp }} th dport 53 iifname vmap @egress"
        ),
    ]);
    lines.extend(reject_rules(&t, "to_host", ""));
    lines.push(match uplink {
        Some(uplink) => {
            format!("add rule {t} postrouting ip saddr {pool} oifname \"{uplink}\" masquerade")
        }
        None => {
            format!("add rule {t} postrouting ip saddr {pool} oifname != {veths} masquerade")
        }
    });
    lines_to_script(lines)
}
