//! A real Prometheus (Debian's `prometheus`) on loopback with its own config and data dir:
//! the metrics server behind usage showback.
use std::process::{Child, Command, Stdio};

/// A Prometheus process with its own config and data dir, killed on drop.
pub struct Prometheus {
    child: Child,
    /// Its HTTP address.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts Prometheus on `port`, scraping `target` (host:port) with `token` every second.
pub fn prometheus(port: u16, target: &str, token: &str) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: sbx\n    authorization:\n      type: Bearer\n      credentials: {token}\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus (apt install prometheus)");
    Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}
