//! `sbx serve` deployed in the test cluster the way an operator deploys it: `kubectl apply -k`
//! of an overlay of `deploy/` (server-side dry run first), its image imported into the real
//! node's containerd by `scripts/test`, two replicas running there under the ServiceAccount
//! and RBAC of `deploy/`, reached through their Service's ClusterIP (kube-proxy on this host).
//! The overlay changes only what this cluster needs: the image built from this tree, the
//! replicas and the sandboxes placed on the real node (its label and taint), a shorter fork
//! timeout, where the agent finds the node's pools (paths of this test process: see
//! [`agent_disk_pool`]), and remote install turned on with the installer's image pinned by
//! digest and its prefix a path of this test process ([`install_prefix`]). The real node is labelled `sbx.io/agent=true`, as an operator labels
//! the nodes that run sandboxes, so the agent DaemonSet runs there. Deployed once per test
//! process; `scripts/k8s-testenv stop` removes it with the cluster.
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The label (and taint key) of the test cluster's real node (`scripts/k8s-testenv`).
pub const REAL_NODE_LABEL: &str = "sbx.io/testenv-node";
/// Namespace of the deployment.
pub const NAMESPACE: &str = "sbx-system";

/// The deployed service. Its replicas run only while a test holds [`Deployed::up`]'s guard:
/// other tests on this cluster expect no replica of sbx but their own (the leader Lease).
pub struct Deployed {
    /// `http://<Service ClusterIP>:8080`.
    pub url: String,
    /// The kubectl of the test environment.
    pub kubectl: String,
}

/// Where the agent on the real node looks for the k7d disk pool (a path of the host, which the
/// tests mount).
pub fn agent_disk_pool() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sbx-agent-{}/disks", std::process::id()))
}

/// Where the remote installer installs sbx on the real node (a path of the host, removed by
/// the test).
pub fn install_prefix() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sbx-install-{}", std::process::id()))
}

/// The agent's state on the real node (its sbxd sandboxes' database, images and files), a
/// path of the host.
pub fn agent_data_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sbx-agent-data-{}", std::process::id()))
}

/// The network namespace the agent's sandboxes are routed through (made by the harness, so
/// that the agent never changes the host's own network).
pub fn agent_router_netns() -> String {
    format!("sbxagent-r{}", std::process::id())
}

/// The LVM volume group whose thin pool `pool` the agent on the real node reports.
pub fn agent_volume_group() -> String {
    format!("sbxagent{}", std::process::id())
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run scripts/test (it builds the sbx image and starts the test cluster with its real node)")
    })
}

/// Runs kubectl against the test cluster (as its admin, as an operator would); its stdout.
pub fn kubectl(kubectl: &str, args: &[&str]) -> String {
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(super::kubeconfig())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {kubectl}: {e}"));
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The deployment, made on first use.
pub async fn deployed() -> &'static Deployed {
    static DEPLOYED: tokio::sync::OnceCell<Deployed> = tokio::sync::OnceCell::const_new();
    DEPLOYED.get_or_init(deploy).await
}

async fn deploy() -> Deployed {
    let kubectl_bin = env("SBX_TEST_KUBECTL");
    let image = env("SBX_TEST_SBX_IMAGE");
    let node = env("SBX_TEST_REAL_NODE");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let overlay = std::env::temp_dir().join(format!("sbx-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&overlay).unwrap();

    // The configuration: deploy/'s, with the sandboxes placed on the real node.
    let mut config: toml::Table =
        toml::from_str(&std::fs::read_to_string(repo.join("deploy/config.toml")).unwrap()).unwrap();
    let kubernetes = config
        .entry("kubernetes")
        .or_insert_with(|| toml::Value::Table(Default::default()))
        .as_table_mut()
        .unwrap();
    kubernetes.insert("forkTimeout".into(), "20s".into());
    // A node whose agent is gone shows within seconds, not a minute.
    kubernetes.insert("agentLostAfter".into(), "15s".into());
    // Remote install on, with the image this tree built, pinned; the real node runs sbx serve.
    let install: toml::Table = toml::from_str(&format!(
        "enabled = true\nimage = \"{}\"\nallowServerNodes = true\ntimeout = \"120s\"\n",
        env("SBX_TEST_SBX_IMAGE_PINNED")
    ))
    .unwrap();
    kubernetes.insert("install".into(), toml::Value::Table(install));
    kubernetes.insert(
        "sandboxNodeSelector".into(),
        toml::Value::Table(
            [(REAL_NODE_LABEL.to_string(), "real".into())]
                .into_iter()
                .collect(),
        ),
    );
    let toleration: toml::Table = toml::from_str(&format!(
        "key = \"{REAL_NODE_LABEL}\"\noperator = \"Equal\"\nvalue = \"real\"\neffect = \"NoSchedule\"\n"
    ))
    .unwrap();
    kubernetes.insert(
        "sandboxTolerations".into(),
        toml::Value::Array(vec![toml::Value::Table(toleration)]),
    );
    // Tenant users pull the test images from the loopback registry (issue 43 point 14).
    let images: toml::Table = toml::from_str(&format!(
        "allowedRegistries = [\"docker.io\", \"{registry}\"]\n",
        registry = super::test_registry()
    ))
    .unwrap();
    config.insert("images".into(), toml::Value::Table(images));
    std::fs::write(
        overlay.join("config.toml"),
        toml::to_string(&config).unwrap(),
    )
    .unwrap();

    let (name, tag) = image
        .rsplit_once(':')
        .expect("SBX_TEST_SBX_IMAGE is NAME:TAG");
    let kustomization = format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {base}
images:
  - name: localhost/sbx
    newName: {name}
    newTag: "{tag}"
configMapGenerator:
  - name: sbx-config
    namespace: {NAMESPACE}
    behavior: replace
    files:
      - config.toml
patches:
  - target:
      kind: Deployment
      name: sbx
    patch: |-
      - op: add
        path: /spec/template/spec/nodeSelector
        value: {{"{REAL_NODE_LABEL}": "real", "kubernetes.io/hostname": "{node}"}}
      - op: add
        path: /spec/template/spec/tolerations
        value: [{{"key": "{REAL_NODE_LABEL}", "operator": "Equal", "value": "real", "effect": "NoSchedule"}}]
  - target:
      kind: DaemonSet
      name: sbx-agent
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{"name": "SBX_AGENT_DISK_POOL", "value": "{disk_pool}"}}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{"name": "SBX_AGENT_THIN_POOL", "value": "{volume_group}/pool"}}
      - op: replace
        path: /spec/template/spec/containers/0/args
        value: ["agent", "--enter-host", "--data-dir", "{data_dir}"]
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{"name": "SBX_AGENT_HOST_NETNS", "value": "{router}"}}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{"name": "SBX_AGENT_NETNS_PREFIX", "value": "{router}-s"}}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{"name": "SBX_AGENT_INSECURE_REGISTRIES", "value": "{registry}"}}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{"name": "SBX_AGENT_PRIVATE_REGISTRIES", "value": "{registry}"}}
  - target:
      kind: DaemonSet
      name: sbx-installer
    patch: |-
      - op: replace
        path: /spec/template/spec/initContainers/0/args
        value: ["agent", "install", "--host-root", "/host", "--prefix", "{prefix}"]
      - op: replace
        path: /spec/template/spec/initContainers/0/volumeMounts/1/mountPath
        value: /host{prefix}
      - op: replace
        path: /spec/template/spec/volumes/1/hostPath/path
        value: {prefix}
"#,
        base = relative_to(&overlay, &repo.join("deploy")),
        disk_pool = agent_disk_pool().display(),
        volume_group = agent_volume_group(),
        data_dir = agent_data_dir().display(),
        router = agent_router_netns(),
        registry = super::test_registry(),
        prefix = install_prefix().display(),
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).unwrap();

    let dir = overlay.to_str().unwrap();
    // The namespace first: a server-side dry run cannot place objects in a namespace that
    // does not exist yet.
    kubectl(
        &kubectl_bin,
        &[
            "apply",
            "-f",
            repo.join("deploy/namespace.yaml").to_str().unwrap(),
        ],
    );
    // The agent's sandboxes are routed through a namespace of this test process; it and the
    // agent's data dir go when the process exits (the tests delete their sandboxes; the
    // containers the agent's pool prepared ahead of requests are removed with the dir).
    let router = agent_router_netns();
    extern "C" fn remove_agent_leftovers() {
        super::reap_sandboxes(&agent_data_dir());
        let _ = Command::new("ip")
            .args(["netns", "del", &agent_router_netns()])
            .output();
        let _ = std::fs::remove_dir_all(agent_data_dir());
    }
    // SAFETY: registers a plain function to run at exit; it touches no Rust state.
    unsafe {
        libc::atexit(remove_agent_leftovers);
    }
    let _ = Command::new("ip").args(["netns", "del", &router]).output();
    for args in [
        vec!["netns", "add", router.as_str()],
        vec!["-n", router.as_str(), "link", "set", "lo", "up"],
    ] {
        let status = Command::new("ip").args(&args).status().unwrap();
        assert!(status.success(), "ip {args:?}");
    }
    // The node that runs sandboxes runs the agent.
    kubectl(
        &kubectl_bin,
        &["label", "--overwrite", "node", &node, "sbx.io/agent=true"],
    );
    kubectl(&kubectl_bin, &["apply", "--dry-run=server", "-k", dir]);
    kubectl(&kubectl_bin, &["apply", "-k", dir]);
    let _ = std::fs::remove_dir_all(&overlay);
    // The installer runs the image pinned by digest (after kustomize, whose `images` would
    // put the tag back).
    let pinned = env("SBX_TEST_SBX_IMAGE_PINNED");
    kubectl(
        &kubectl_bin,
        &[
            "-n",
            "sbx-agent",
            "set",
            "image",
            "daemonset/sbx-installer",
            &format!("install={pinned}"),
            &format!("installed={pinned}"),
        ],
    );
    kubectl(
        &kubectl_bin,
        &[
            "-n",
            NAMESPACE,
            "rollout",
            "status",
            "deployment/sbx",
            "--timeout=180s",
        ],
    );
    kubectl(
        &kubectl_bin,
        &[
            "-n",
            "sbx-agent",
            "rollout",
            "status",
            "daemonset/sbx-agent",
            "--timeout=180s",
        ],
    );
    let ip = kubectl(
        &kubectl_bin,
        &[
            "-n",
            NAMESPACE,
            "get",
            "service",
            "sbx",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    let url = format!("http://{}:8080", ip.trim());
    wait_ready(&url).await;
    // Down until a test brings it up (`up`).
    kubectl(
        &kubectl_bin,
        &["-n", NAMESPACE, "scale", "deployment/sbx", "--replicas=0"],
    );
    Deployed {
        url,
        kubectl: kubectl_bin,
    }
}

impl Deployed {
    /// Scales the deployment to its two replicas and waits until they are ready; they are
    /// scaled to 0 again (and gone, their Leases released) when the guard drops.
    pub async fn up(&'static self) -> Replicas {
        self.scale(2);
        kubectl(
            &self.kubectl,
            &[
                "-n",
                NAMESPACE,
                "rollout",
                "status",
                "deployment/sbx",
                "--timeout=180s",
            ],
        );
        wait_ready(&self.url).await;
        Replicas { deployed: self }
    }

    fn scale(&self, replicas: u32) {
        kubectl(
            &self.kubectl,
            &[
                "-n",
                NAMESPACE,
                "scale",
                "deployment/sbx",
                &format!("--replicas={replicas}"),
            ],
        );
    }

    /// The replicas' Pod IPs (each serves on port 8080; the Service picks one per request).
    pub fn pod_ips(&self) -> Vec<String> {
        kubectl(
            &self.kubectl,
            &[
                "-n",
                NAMESPACE,
                "get",
                "pods",
                "-l",
                "app.kubernetes.io/name=sbx,app.kubernetes.io/component=api",
                "-o",
                "jsonpath={.items[*].status.podIP}",
            ],
        )
        .split_whitespace()
        .map(str::to_string)
        .collect()
    }

    /// What the replicas logged besides the requests they served (for a failure's message):
    /// the last 60 such lines.
    pub fn logs(&self) -> String {
        let all = kubectl(
            &self.kubectl,
            &[
                "-n",
                NAMESPACE,
                "logs",
                "-l",
                "app.kubernetes.io/name=sbx,app.kubernetes.io/component=api",
                "--prefix",
                "--tail=-1",
            ],
        );
        let lines: Vec<&str> = all
            .lines()
            .filter(|l| !l.contains("tower_http::trace"))
            .collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// The names of the deployment's Pods now.
    pub fn pods(&self) -> Vec<String> {
        kubectl(
            &self.kubectl,
            &[
                "-n",
                NAMESPACE,
                "get",
                "pods",
                "-l",
                "app.kubernetes.io/name=sbx,app.kubernetes.io/component=api",
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
        )
        .split_whitespace()
        .map(str::to_string)
        .collect()
    }
}

/// The first admin key's token and a client of the deployed service with it. Keys are the
/// cluster's: the token is in the bootstrap Secret (written by whichever replica of sbx
/// minted it), and every replica reads the keys anew every few seconds.
pub async fn admin(deployed: &Deployed) -> (String, sbx::cli::client::ApiClient) {
    let token = super::bootstrap_token(&super::cluster().await).await;
    let client = sbx::cli::client::ApiClient::new(&deployed.url, Some(token.clone())).unwrap();
    let started = Instant::now();
    while let Err(e) = client.whoami().await {
        assert!(started.elapsed() < Duration::from_secs(30), "whoami: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (token, client)
}

/// The deployment's replicas, up while this lives.
pub struct Replicas {
    /// The deployment.
    pub deployed: &'static Deployed,
}

impl Drop for Replicas {
    fn drop(&mut self) {
        self.deployed.scale(0);
        let started = Instant::now();
        while !self.deployed.pods().is_empty() && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Waits until a ready replica answers `GET /readyz` through the Service.
async fn wait_ready(url: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let started = Instant::now();
    loop {
        match http.get(format!("{url}/readyz")).send().await {
            Ok(r) if r.status().is_success() => return,
            other => assert!(
                started.elapsed() < Duration::from_secs(60),
                "the deployed sbx never answered at {url}/readyz: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `to` as a path relative to the directory `from` (kustomize takes no absolute bases).
fn relative_to(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}
