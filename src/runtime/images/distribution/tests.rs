//! Unit tests of `distribution`.
use super::*;

#[test]
fn only_public_addresses_pass() {
    for private in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "168.63.129.16",
        "::1",
        "::",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "ff02::1",
    ] {
        let ip: IpAddr = private.parse().unwrap();
        assert!(non_public_kind(ip).is_some(), "{private}");
    }
    for public in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
        let ip: IpAddr = public.parse().unwrap();
        assert_eq!(non_public_kind(ip), None, "{public}");
    }
}

#[test]
fn ip_literals_are_judged_and_private_registries_trusted() {
    let guard = AddressGuard::default();
    let url = |u: &str| Url::parse(u).unwrap();
    assert!(guard.check_url(&url("http://127.0.0.1:5000/v2/")).is_err());
    assert!(guard.check_url(&url("http://[::1]:5000/v2/")).is_err());
    assert!(
        guard
            .check_url(&url("http://169.254.169.254/token"))
            .is_err()
    );
    assert!(guard.check_url(&url("file:///etc/passwd")).is_err());
    assert!(
        guard
            .check_url(&url("https://registry.example/v2/"))
            .is_ok()
    );
    assert!(guard.check_url(&url("https://1.1.1.1/v2/")).is_ok());
    guard.set_private(vec!["127.0.0.1:5000".into(), "[::1]:5000".into()]);
    assert!(guard.check_url(&url("http://127.0.0.1:5000/v2/")).is_ok());
    assert!(guard.check_url(&url("http://[::1]:5000/v2/")).is_ok());
    assert!(
        guard
            .check_url(&url("http://169.254.169.254/token"))
            .is_err()
    );
    assert!(
        guard
            .check_url(&url("http://127.0.0.1:5001/token"))
            .is_err()
    );
    assert!(guard.trusts_host("127.0.0.1"));
    assert!(!guard.trusts_host("localhost"));
}

#[test]
fn challenges_are_read() {
    let mut headers = HeaderMap::new();
    headers.insert(
        WWW_AUTHENTICATE,
        r#"Bearer realm="https://auth.example/token",service="registry.example",scope="x""#
            .parse()
            .unwrap(),
    );
    assert_eq!(
        bearer_challenge(&headers),
        Some(Challenge {
            realm: "https://auth.example/token".into(),
            service: Some("registry.example".into()),
        })
    );
    let mut basic = HeaderMap::new();
    basic.insert(WWW_AUTHENTICATE, r#"Basic realm="x""#.parse().unwrap());
    assert_eq!(bearer_challenge(&basic), None);
}
