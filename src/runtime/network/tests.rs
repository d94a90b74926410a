use super::*;

fn net(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

fn manager(config: NetworkConfig) -> NetworkManager {
    NetworkManager::from_config(config, || vec![Ipv4Addr::new(192, 0, 2, 53)]).unwrap()
}

#[test]
fn slot_math() {
    let pool = net("10.88.0.0/16");
    assert_eq!(
        slot_addresses(pool, 0).unwrap(),
        (Ipv4Addr::new(10, 88, 0, 1), Ipv4Addr::new(10, 88, 0, 2))
    );
    assert_eq!(
        slot_addresses(pool, 5).unwrap(),
        (Ipv4Addr::new(10, 88, 0, 21), Ipv4Addr::new(10, 88, 0, 22))
    );
    assert_eq!(
        slot_addresses(pool, 16383).unwrap(),
        (
            Ipv4Addr::new(10, 88, 255, 253),
            Ipv4Addr::new(10, 88, 255, 254)
        )
    );
    assert!(matches!(
        slot_addresses(pool, 16384),
        Err(NetworkError::SlotOutOfRange {
            capacity: 16384,
            ..
        })
    ));
    assert!(slot_addresses(net("10.0.0.0/30"), 1).is_err());
    let all = net("0.0.0.0/0");
    assert_eq!(
        slot_addresses(all, u32::MAX / 4).unwrap().1,
        Ipv4Addr::new(255, 255, 255, 254)
    );
    assert!(slot_addresses(all, u32::MAX / 4 + 1).is_err());
    assert_eq!(host_veth_name(u32::MAX).len(), 14, "fits IFNAMSIZ");
}

#[test]
fn keys_are_checked() {
    let m = manager(NetworkConfig::default());
    assert!(m.attachment("abc123", 1).is_ok());
    for bad in ["", "ABC", "a-b", "abcdefghijk", "../x", "a b"] {
        assert!(
            matches!(m.attachment(bad, 1), Err(NetworkError::InvalidKey(_))),
            "{bad:?}"
        );
    }
    let att = m.attachment("k1", 3).unwrap();
    assert_eq!(att.netns_name, "sbx-k1");
    assert_eq!(att.netns_path, Path::new("/run/netns/sbx-k1"));
    assert_eq!(att.host_veth, "sbxv3");
    assert_eq!(att.address, Ipv4Addr::new(10, 88, 0, 14));
    assert_eq!(att.gateway, Ipv4Addr::new(10, 88, 0, 13));
    assert_eq!(att.prefix_len, 30);
    assert_eq!(att.dns, vec![Ipv4Addr::new(192, 0, 2, 53)]);
}

#[test]
fn config_validation() {
    let bad = |c: NetworkConfig| NetworkManager::from_config(c, Vec::new).unwrap_err();
    let base = NetworkConfig::default();
    for pool in [
        "10.88.0.0/31",
        "10.88.0.1/16",
        "nonsense",
        "169.254.0.0/16",
        "127.0.0.0/8",
    ] {
        let err = bad(NetworkConfig {
            pool: pool.into(),
            ..base.clone()
        });
        assert!(matches!(err, NetworkError::Config(_)), "{pool}: {err}");
    }
    for prefix in ["", "a/b", ".x", "a b"] {
        bad(NetworkConfig {
            netns_prefix: prefix.into(),
            ..base.clone()
        });
    }
    bad(NetworkConfig {
        uplink: Some("eth0\"; flush ruleset".into()),
        ..base.clone()
    });
    bad(NetworkConfig {
        host_netns: Some("../etc".into()),
        ..base.clone()
    });
    bad(NetworkConfig {
        host_netns: Some("sbx-no-such-netns-here".into()),
        ..base.clone()
    });
    bad(NetworkConfig {
        dns: Some(vec![Ipv4Addr::LOCALHOST]),
        ..base.clone()
    });
    for entry in ["10.0.0.1/8", "fd00::/8", "example.com", ""] {
        let err = bad(NetworkConfig {
            egress_deny: Some(vec![entry.into()]),
            ..base.clone()
        });
        assert!(
            err.to_string().contains("egressDeny entry"),
            "{entry}: {err}"
        );
    }
    // An empty deny list still refuses the pool and the always-denied ranges.
    let open = NetworkManager::from_config(
        NetworkConfig {
            egress_deny: Some(Vec::new()),
            ..base.clone()
        },
        Vec::new,
    )
    .unwrap();
    assert_eq!(
        open.denied()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "0.0.0.0/8",
            "10.88.0.0/16",
            "169.254.0.0/16",
            "224.0.0.0/4",
            "240.0.0.0/4"
        ]
    );
    let small = NetworkConfig {
        pool: "10.0.0.0/30".into(),
        ..base
    };
    assert_eq!(
        NetworkManager::from_config(small, Vec::new)
            .unwrap()
            .capacity(),
        1
    );
}

#[test]
fn config_deserializes_camel_case() {
    let c: NetworkConfig = serde_json::from_str(
        r#"{"hostNetns":"r1","pool":"10.9.0.0/24","uplink":"up0","dns":["1.1.1.1"],"netnsPrefix":"t-","egressDeny":["192.0.2.0/24"]}"#,
    )
    .unwrap();
    assert_eq!(c.host_netns.as_deref(), Some("r1"));
    assert_eq!(c.pool, "10.9.0.0/24");
    assert_eq!(c.uplink.as_deref(), Some("up0"));
    assert_eq!(c.dns, Some(vec![Ipv4Addr::new(1, 1, 1, 1)]));
    assert_eq!(c.netns_prefix, "t-");
    assert_eq!(c.egress_deny, Some(vec!["192.0.2.0/24".to_owned()]));
    let d: NetworkConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(d, NetworkConfig::default());
}

#[test]
fn resolv_conf_parsing() {
    let text = "# comment\nnameserver 127.0.0.53\nnameserver 10.0.0.2\nnameserver ::1\n\
                nameserver 10.0.0.2\noptions edns0\nnameserver 1.1.1.1 # x\n";
    assert_eq!(
        parse_resolv_conf(text),
        vec![Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(1, 1, 1, 1)]
    );
    let m = manager(NetworkConfig {
        dns: Some(vec![Ipv4Addr::new(10, 0, 0, 2)]),
        ..Default::default()
    });
    assert_eq!(m.resolv_conf(), "# Generated by sbx\nnameserver 10.0.0.2\n");
    let none = manager(NetworkConfig {
        dns: Some(vec![]),
        ..Default::default()
    });
    assert!(!none.resolv_conf().contains("nameserver"));
}

#[test]
fn production_commands_use_the_daemons_namespace() {
    let m = manager(NetworkConfig::default());
    assert_eq!(m.host_netns, None);
    let att = m.attachment("abc", 7).unwrap();
    assert_eq!(att.gateway, Ipv4Addr::new(10, 88, 0, 29));
    assert_eq!(att.address, Ipv4Addr::new(10, 88, 0, 30));
    assert_eq!(att.netns_path, Path::new("/run/netns/sbx-abc"));
    let base = base_script(m.pool, m.uplink.as_deref(), &m.dns, m.denied());
    assert!(
        base.contains("add element inet sbx dns { 192.0.2.53 }\n"),
        "{base}"
    );
    // The default deny list, the pool and the always-refused ranges, merged into disjoint
    // intervals (the pool lies in 10.0.0.0/8, link-local in the default list).
    assert!(
        base.contains(
            "add element inet sbx deny { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 168.63.129.16/32, \
             169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16, 224.0.0.0/4, 240.0.0.0/4 }\n"
        ),
        "{base}"
    );
    // Strict reverse-path filtering on the sandboxes' links, before conntrack.
    assert!(
        base.contains(
            "add chain inet sbx prerouting { type filter hook prerouting priority raw; policy accept; }\n"
        ) && base.contains(
            "add rule inet sbx prerouting iifname \"sbxv*\" fib saddr . iif oif missing drop\n"
        ),
        "{base}"
    );
    // The destination's verdict comes before any sender's chain can accept.
    let to = base
        .find("forward oifname \"sbxv*\" jump to_sandbox")
        .unwrap();
    let from = base
        .find("forward iifname \"sbxv*\" jump from_sandbox")
        .unwrap();
    assert!(to < from, "{base}");
    let dns = base.find("from_sandbox ip daddr @dns").unwrap();
    let deny = base
        .find("from_sandbox ip daddr @deny meta l4proto tcp reject with tcp reset\n")
        .unwrap();
    let vmap = base.find("from_sandbox iifname vmap @egress\n").unwrap();
    assert!(dns < deny && deny < vmap, "{base}");
    assert!(
        base.contains(
            "add rule inet sbx to_sandbox ct state established,related return\n\
             add rule inet sbx to_sandbox iifname \"sbxv*\" meta l4proto tcp reject with tcp reset\n\
             add rule inet sbx to_sandbox iifname \"sbxv*\" reject with icmpx admin-prohibited\n\
             add rule inet sbx to_sandbox drop\n"
        ),
        "{base}"
    );
    assert!(
        base.contains(
            "add rule inet sbx postrouting ip saddr 10.88.0.0/16 oifname != \"sbxv*\" masquerade\n"
        ),
        "{base}"
    );
    let with_uplink = manager(NetworkConfig {
        uplink: Some("ens3".into()),
        ..Default::default()
    });
    assert!(
        base_script(
            with_uplink.pool,
            with_uplink.uplink.as_deref(),
            &with_uplink.dns,
            with_uplink.denied()
        )
        .contains("oifname \"ens3\" masquerade")
    );
}

#[test]
fn sandbox_rules_by_policy() {
    let m = manager(NetworkConfig::default());
    let att = m.attachment("abc", 2).unwrap();
    let open = sandbox_script(&att, &Egress::Unrestricted, true);
    assert!(
        open.contains("add rule inet sbx sb2 ip saddr != 10.88.0.10 drop\n"),
        "{open}"
    );
    // What no policy opens is refused before the sandbox's chain, in from_sandbox.
    assert!(!open.contains("reject"), "{open}");
    assert!(
        open.contains("add rule inet sbx sb2 counter name \"sb2_tx\" accept\n"),
        "{open}"
    );
    assert!(
        open.ends_with("add element inet sbx egress { \"sbxv2\" : jump sb2 }\n"),
        "{open}"
    );
    assert!(
        open.starts_with("create chain inet sbx sb2\ncreate set inet sbx sb2_allow "),
        "{open}"
    );
    assert!(
        !open.contains("delete") && !open.contains("flush"),
        "attach must not delete: {open}"
    );
    let closed = sandbox_script(&att, &Egress::DenyAll, false);
    assert!(
        closed.starts_with("flush chain inet sbx sb2\nflush set inet sbx sb2_allow\n"),
        "{closed}"
    );
    assert!(
        closed.ends_with(
            "add rule inet sbx sb2 meta l4proto tcp reject with tcp reset\n\
             add rule inet sbx sb2 reject with icmpx admin-prohibited\n"
        ),
        "{closed}"
    );
    assert!(
        !closed.contains("dport 53"),
        "DenyAll refuses DNS: {closed}"
    );
    let some = sandbox_script(
        &att,
        &Egress::Allow(vec![net("1.2.3.0/24"), net("1.2.3.4/32")]),
        false,
    );
    assert!(
        some.contains("add element inet sbx sb2_allow { 1.2.3.0/24 }\n"),
        "{some}"
    );
    assert!(
        some.contains("th dport 53 counter name \"sb2_tx\" accept"),
        "{some}"
    );
    assert!(
        some.contains("ip daddr @sb2_allow counter name \"sb2_tx\" accept"),
        "{some}"
    );
}

#[test]
fn remove_script_is_self_sufficient() {
    let s = remove_script(&[4, 9]);
    for slot in [4, 9] {
        let add = s.find(&format!("add chain inet sbx sb{slot}\n")).unwrap();
        let del = s
            .find(&format!("delete chain inet sbx sb{slot}\n"))
            .unwrap();
        assert!(add < del);
        assert!(s.contains(&format!(
            "delete element inet sbx egress {{ \"sbxv{slot}\" }}"
        )));
        assert!(s.contains(&format!("delete counter inet sbx sb{slot}_tx")));
    }
}

#[test]
fn nft_listing_parsing() {
    let listing = r#"{"nftables":[{"metainfo":{"version":"1.0.6"}},
        {"table":{"family":"inet","name":"sbx","handle":1}},
        {"chain":{"family":"inet","table":"sbx","name":"forward","handle":2}},
        {"chain":{"family":"inet","table":"sbx","name":"sb3","handle":3}},
        {"set":{"family":"inet","name":"sb7_allow","table":"sbx","type":"ipv4_addr"}},
        {"set":{"family":"inet","name":"dns","table":"sbx","type":"ipv4_addr"}},
        {"map":{"family":"inet","name":"egress","table":"sbx","type":"ifname","map":"verdict",
                "elem":[["sbxv3",{"jump":{"target":"sb3"}}],["sbxv12",{"jump":{"target":"sb12"}}]]}},
        {"counter":{"family":"inet","name":"sb3_tx","table":"sbx","packets":2,"bytes":120}},
        {"counter":{"family":"inet","name":"sb40_tx","table":"sbx","packets":0,"bytes":0}},
        {"counter":{"family":"inet","name":"other","table":"sbx","packets":0,"bytes":5}}]}"#;
    assert_eq!(
        nft_sandbox_slots(listing).unwrap(),
        BTreeSet::from([3, 7, 12, 40])
    );
    assert_eq!(
        counters(listing).unwrap(),
        BTreeMap::from([(3, 120), (40, 0)])
    );
    assert!(nft_sandbox_slots("not json").is_err());
    assert!(counters("{}").is_err());
}

#[test]
fn small_parsers() {
    assert_eq!(parse_slot("sbxv12", "sbxv", ""), Some(12));
    assert_eq!(parse_slot("sbxv012", "sbxv", ""), None);
    assert_eq!(parse_slot("sbxv", "sbxv", ""), None);
    assert_eq!(parse_slot("sb3_allow", "sb", "_allow"), Some(3));
    assert_eq!(parse_slot("sb3_tx", "sb", ""), None);
    let dev = "Inter-|   Receive\n face |bytes\n    lo: 0 0\n  sbxv5: 1 2\neth0: 3\n";
    assert_eq!(parse_proc_net_dev(dev), vec!["lo", "sbxv5", "eth0"]);
    let batch = "link add a\naddr add b\nlink set c up\n";
    assert_eq!(
        failed_batch_line("RTNETLINK answers: File exists\nCommand failed -:2", batch),
        Some("addr add b")
    );
    assert_eq!(failed_batch_line("Error: x", batch), None);
}
