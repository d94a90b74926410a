//! Unit tests of the configuration: parsing, defaults and the checks of `resolve`.
use super::*;

#[test]
fn flags_win_over_file_and_file_over_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sbx.toml");
    std::fs::write(
        &file,
        "listen = \"0.0.0.0:9000\"\nmode = \"production\"\ndataDir = \"/srv/sbx\"\n",
    )
    .unwrap();
    let cfg = Config::resolve(Overrides {
        listen: Some("127.0.0.1:7000".into()),
        config_file: Some(file.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(cfg.listen.to_string(), "127.0.0.1:7000");
    assert_eq!(cfg.mode, Mode::Production);
    assert_eq!(cfg.data_dir, PathBuf::from("/srv/sbx"));
    assert_eq!(cfg.platform, PlatformKind::Local);

    let cfg = Config::resolve(Overrides::default()).unwrap();
    assert_eq!(cfg.listen.to_string(), paths::DEFAULT_LISTEN);
    assert_eq!(cfg.mode, Mode::Development);
}

#[test]
fn bad_files_and_addresses_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sbx.toml");
    std::fs::write(&file, "lisen = \"x\"\n").unwrap();
    let err = Config::resolve(Overrides {
        config_file: Some(file),
        ..Default::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("lisen"), "{err}");

    let err = Config::resolve(Overrides {
        config_file: Some(dir.path().join("missing.toml")),
        ..Default::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");

    let err = Config::resolve(Overrides {
        listen: Some("localhost".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(err, ConfigError::Listen(_)));
    assert!("staging".parse::<Mode>().is_err());
    assert_eq!("k8s".parse::<PlatformKind>(), Ok(PlatformKind::Kubernetes));
}

#[test]
fn remote_install_needs_a_pinned_image_and_the_kubernetes_platform() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sbx.toml");
    let resolve = |text: &str, platform: PlatformKind| {
        std::fs::write(&file, text).unwrap();
        Config::resolve(Overrides {
            config_file: Some(file.clone()),
            platform: Some(platform),
            ..Default::default()
        })
    };
    let pinned = format!("r.example/sbx@sha256:{}", "a".repeat(64));
    let on = format!("[kubernetes.install]\nenabled = true\nimage = \"{pinned}\"\n");
    let cfg = resolve(&on, PlatformKind::Kubernetes).unwrap();
    let install = cfg.kubernetes.install.unwrap();
    assert_eq!(install.image, pinned);
    assert_eq!(install.daemon_set, "sbx-installer");
    assert!(!install.allow_server_nodes);
    let err = resolve(&on, PlatformKind::Local).unwrap_err();
    assert!(
        err.to_string().contains("platform = \"kubernetes\""),
        "{err}"
    );
    let tagged = "[kubernetes.install]\nenabled = true\nimage = \"r.example/sbx:1.0\"\n";
    let err = resolve(tagged, PlatformKind::Kubernetes).unwrap_err();
    assert!(err.to_string().contains("pinned by digest"), "{err}");
    // Off: nothing checked, nothing on.
    let off = resolve("[kubernetes.install]\nimage = \"x\"\n", PlatformKind::Local).unwrap();
    assert!(off.kubernetes.install.is_none());
}

#[test]
fn internal_tls_is_on_in_production_and_cannot_be_turned_off_there() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sbx.toml");
    let resolve = |text: &str, mode: Mode| {
        std::fs::write(&file, text).unwrap();
        Config::resolve(Overrides {
            config_file: Some(file.clone()),
            platform: Some(PlatformKind::Kubernetes),
            mode: Some(mode),
            ..Default::default()
        })
    };
    let cfg = resolve("", Mode::Production).unwrap();
    assert!(cfg.kubernetes.internal_tls);
    assert_eq!(cfg.kubernetes.internal_listen.to_string(), "0.0.0.0:8443");
    assert_eq!(cfg.kubernetes.peer_scheme(), "https");
    let local = "127.0.0.1:8443".parse().unwrap();
    assert_eq!(
        cfg.kubernetes.advertised(local).as_deref(),
        Some("https://127.0.0.1:8443")
    );
    let off = "[kubernetes]\ninternalTls = false\n";
    let err = resolve(off, Mode::Production).unwrap_err();
    assert!(
        err.to_string()
            .contains("internalTls = false is refused in production"),
        "{err}"
    );
    // Development: off unless asked for; then a plain advertiseUrl is refused.
    let cfg = resolve("", Mode::Development).unwrap();
    assert!(!cfg.kubernetes.internal_tls);
    assert_eq!(cfg.kubernetes.peer_scheme(), "http");
    let plain = "[kubernetes]\ninternalTls = true\nadvertiseUrl = \"http://10.0.0.5:8080\"\n";
    let err = resolve(plain, Mode::Development).unwrap_err();
    assert!(
        err.to_string().contains("must be https://HOST:PORT"),
        "{err}"
    );
    let bad = "[kubernetes]\ninternalListen = \"everywhere\"\n";
    let err = resolve(bad, Mode::Development).unwrap_err();
    assert!(
        err.to_string().contains("kubernetes.internalListen"),
        "{err}"
    );
}
