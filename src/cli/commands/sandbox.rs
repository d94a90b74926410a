//! `sbx sandbox …`: create, list, get, delete, delete-all, exec, logs, pause, resume, metrics.
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};

use crate::cli::commands::Context;
use crate::cli::output::{Detail, Row};
use crate::shared::duration::parse_duration;
use crate::shared::models::DEFAULT_NAMESPACE;
use crate::shared::models::sandbox::{
    CreateSandboxRequest, CreateSnapshotRequest, ExecRequest, ForkRequest, LogsQuery, PauseRequest,
    ResourceLimits, ResumeRequest, Sandbox, SandboxMetrics, SandboxStatus,
};
use crate::shared::timestamp::now_unix;

/// Manage sandboxes: create, inspect, run commands, read logs, pause, delete
#[derive(Debug, Clone, Subcommand)]
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum SandboxCommand {
    Create(CreateArgs),
    #[command(visible_alias = "ls")]
    List(ListArgs),
    Get(GetArgs),
    #[command(visible_alias = "rm")]
    Delete(DeleteArgs),
    DeleteAll(DeleteAllArgs),
    Exec(ExecArgs),
    Logs(LogsArgs),
    Cp(super::cp::CpArgs),
    Update(super::update::UpdateArgs),
    Pause(PauseArgs),
    Resume(ResumeArgs),
    Fork(ForkArgs),
    Snapshot(SnapshotArgs),
    #[command(visible_alias = "top")]
    Metrics(MetricsArgs),
}

/// The namespace option shared by every sandbox command.
#[derive(Debug, Clone, Args)]
pub struct NamespaceArg {
    /// Namespace of the sandbox
    #[arg(short = 'n', long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
}

/// Create a sandbox and wait until it is Ready
///
/// Examples:
///   sbx sandbox create demo --image 127.0.0.1:5000/sbx-test/busybox:latest
///   sbx sandbox create job --image busybox --limit cpu=500m,memory=256Mi --non-root
///   sbx sandbox create net --image busybox --egress 203.0.113.0/24 --egress 198.51.100.7/32
///   sbx sandbox create app --image busybox -e MODE=test -e API_TOKEN -l team=ml -- sleep 3600
///   sbx sandbox create web --image busybox --entrypoint "/bin/sh -c" -- "httpd -f -p 8080"
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct CreateArgs {
    /// Sandbox name (lowercase letters, digits and '-')
    pub name: String,
    /// Container image reference
    #[arg(long)]
    pub image: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Limits as KEY=VALUE[,KEY=VALUE] with keys cpu, memory, ephemeral-storage (repeatable)
    #[arg(long = "limit", value_name = "KEY=VALUE,...")]
    pub limits: Vec<String>,
    /// Env file (KEY=VALUE lines) read on the API host; a relative path is made absolute here
    #[arg(long, value_name = "PATH")]
    pub env_file: Option<String>,
    /// Environment variable (repeatable; over --env-file); KEY alone takes this shell's value.
    /// Kept as a Secret on Kubernetes, never shown again
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Label (repeatable), listed with `sbx sandbox ls -l KEY=VALUE`
    #[arg(short = 'l', long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Replace the image's entrypoint (split as a shell would; the image's cmd goes too
    /// unless a command follows --)
    #[arg(long, value_name = "COMMAND")]
    pub entrypoint: Option<String>,
    /// Delete the sandbox this long after its create, e.g. 30m or 2h
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// Pause it after this long without an exec, stream or file copy
    #[arg(long, value_name = "DURATION")]
    pub idle_timeout: Option<String>,
    /// Replace the image's cmd with these arguments (after --)
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
    /// Shell commands run before the sandbox reads Ready
    #[arg(long, value_name = "SCRIPT")]
    pub before_script: Option<String>,
    /// Allow egress only to this IPv4 CIDR (repeatable); without any, egress is the internet.
    /// Other sandboxes, the host, link-local and the admin's denied ranges stay unreachable
    #[arg(long = "egress", value_name = "CIDR", conflicts_with = "no_egress")]
    pub egress: Vec<String>,
    /// Allow no egress at all
    #[arg(long)]
    pub no_egress: bool,
    /// Run as UID, GID and FSGroup 65532
    #[arg(long)]
    pub non_root: bool,
    /// Run the container's user as UID 65532 (group unchanged)
    #[arg(long)]
    pub container_non_root: bool,
    /// Capability to add back, e.g. NET_BIND_SERVICE (repeatable)
    #[arg(long = "cap-add", value_name = "CAP")]
    pub cap_add: Vec<String>,
    /// Capability to drop (repeatable); the default drops ALL
    #[arg(long = "cap-drop", value_name = "CAP")]
    pub cap_drop: Vec<String>,
    /// Backend (default: the platform's)
    #[arg(long)]
    pub backend: Option<String>,
    /// Return as soon as the server accepted the sandbox
    #[arg(long, overrides_with = "wait")]
    pub no_wait: bool,
    /// Wait until the sandbox is Ready (the default)
    #[arg(long)]
    pub wait: bool,
    /// How long to wait for Ready, e.g. 90s or 5m
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub timeout: String,
}

/// List sandboxes
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Namespace to list
    #[arg(short = 'n', long, default_value = DEFAULT_NAMESPACE, conflicts_with = "all_namespaces")]
    pub namespace: String,
    /// List sandboxes of every namespace
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only those whose labels match: KEY=VALUE, KEY!=VALUE, KEY, !KEY, comma-separated
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
}

/// Show one sandbox
#[derive(Debug, Clone, Args)]
pub struct GetArgs {
    /// Sandbox name
    pub name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
}

/// Delete sandboxes (irreversible)
#[derive(Debug, Clone, Args)]
pub struct DeleteArgs {
    /// Sandbox names
    #[arg(required = true)]
    pub names: Vec<String>,
    #[command(flatten)]
    pub ns: NamespaceArg,
}

/// Delete every sandbox of a namespace (irreversible; asks on a terminal)
#[derive(Debug, Clone, Args)]
pub struct DeleteAllArgs {
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Do not ask for confirmation
    #[arg(short, long)]
    pub yes: bool,
}

/// Run a command in a sandbox; exits with the command's exit status
///
/// Output is streamed as the command writes it. With -i the command reads this terminal's
/// stdin; with -it it gets a terminal of its own (raw mode, window size kept in step), for
/// shells and editors. Without a terminal, the first Ctrl-C is sent to the command as SIGINT
/// and a second one leaves (ending the command). With -o json|yaml the command runs to the
/// end and its exit code, stdout and stderr are printed as one record.
///
/// Examples:
///   sbx sandbox exec demo -- uname -a
///   sbx sandbox exec demo -- sh -c 'echo $HOSTNAME; ls /tmp'
///   sbx sandbox exec -it demo -- sh
///   tar c src | sbx sandbox exec -i demo -- tar x -C /tmp
///   sbx sandbox exec demo -o json -- cat /etc/os-release
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct ExecArgs {
    /// Sandbox name
    pub name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Send this terminal's stdin to the command
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Give the command a terminal (with -i: an interactive session)
    #[arg(short = 't', long)]
    pub tty: bool,
    /// Kill the command after this many seconds (exit status 124)
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// The command and its arguments (after --)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Print a sandbox's log, or follow it as it grows
///
/// Examples:
///   sbx sandbox logs demo --tail 20
///   sbx sandbox logs demo --since 10m
///   sbx sandbox logs -f demo          # until the sandbox stops or Ctrl-C
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct LogsArgs {
    /// Sandbox name
    pub name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Container to read
    #[arg(short = 'c', long, default_value = "sandbox")]
    pub container: String,
    /// Trailing lines to print
    #[arg(long, default_value_t = 200)]
    pub tail: u64,
    /// Only lines newer than this, e.g. 10m, 1h or 30 (seconds)
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Keep printing lines as they are written, until the sandbox stops
    #[arg(short = 'f', long)]
    pub follow: bool,
}

/// Pause (freeze) a sandbox, optionally keeping a snapshot of its files
///
/// Examples:
///   sbx sandbox pause demo
///   sbx sandbox pause demo --snapshot            # snapshot named demo-paused-<unix seconds>
///   sbx sandbox pause demo --snapshot before-upgrade
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct PauseArgs {
    /// Sandbox name
    pub name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Also take a `pause` snapshot, named NAME or <sandbox>-paused-<unix seconds>
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    pub snapshot: Option<String>,
}

/// Clone a sandbox into a new one with a copy of its files (and, with --warm, its processes)
///
/// Examples:
///   sbx sandbox fork demo demo-2
///   sbx sandbox fork demo demo-3 --snapshot demo-at-fork   # keep the snapshot, as `named`
///   sbx sandbox fork demo demo-4 --warm                     # processes continue in the clone
#[derive(Debug, Clone, Args)]
#[command(verbatim_doc_comment)]
pub struct ForkArgs {
    /// Source sandbox
    pub source: String,
    /// Name of the new sandbox
    pub new_name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
    /// Keep the intermediate snapshot under this name (kind `named`)
    #[arg(long, value_name = "NAME")]
    pub snapshot: Option<String>,
    /// Keep the running processes too: the clone continues from the source's memory
    /// (CRIU checkpoint of the source, left running, restored into the clone); without it,
    /// the clone starts afresh on a copy of the source's files
    #[arg(long)]
    pub warm: bool,
}

/// Take a snapshot of a running sandbox without pausing it
#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    /// Sandbox name
    pub name: String,
    /// Snapshot name
    pub snapshot: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
}

/// Resume a paused sandbox
#[derive(Debug, Clone, Args)]
pub struct ResumeArgs {
    /// Sandbox name
    pub name: String,
    #[command(flatten)]
    pub ns: NamespaceArg,
}

/// CPU and memory use of the sandboxes of a namespace
#[derive(Debug, Clone, Args)]
pub struct MetricsArgs {
    #[command(flatten)]
    pub ns: NamespaceArg,
}

impl Row for Sandbox {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut h = vec![
            "NAMESPACE",
            "NAME",
            "STATUS",
            "READY",
            "RESTARTS",
            "AGE",
            "IMAGE",
        ];
        if wide {
            h.extend(["BACKEND", "LABELS", "ERROR"]);
        }
        h
    }

    fn cells(&self, wide: bool) -> Vec<String> {
        let mut c = vec![
            self.namespace.clone(),
            self.name.clone(),
            self.status.to_string(),
            self.ready.clone(),
            self.restarts.to_string(),
            self.age.clone(),
            self.image.clone(),
        ];
        if wide {
            c.push(self.backend.clone());
            c.push(label_text(&self.labels));
            c.push(self.error_message.clone());
        }
        c
    }
}

impl Detail for Sandbox {
    fn fields(&self) -> Vec<(&'static str, String)> {
        let mut f = vec![
            ("Name", self.name.clone()),
            ("Namespace", self.namespace.clone()),
            ("Status", self.status.to_string()),
            ("Ready", self.ready.clone()),
            ("Restarts", self.restarts.to_string()),
            ("Age", self.age.clone()),
            ("Image", self.image.clone()),
            ("Backend", self.backend.clone()),
        ];
        if !self.labels.is_empty() {
            f.push(("Labels", label_text(&self.labels)));
        }
        for (field, value) in [
            ("Expires", self.expires_at.clone()),
            (
                "Idle timeout",
                self.idle_timeout_seconds.map(|s| format!("{s}s")),
            ),
            ("Last activity", self.last_activity_at.clone()),
        ] {
            if let Some(value) = value {
                f.push((field, value));
            }
        }
        if !self.error_message.is_empty() {
            f.push(("Error", self.error_message.clone()));
        }
        f
    }
}

impl Row for SandboxMetrics {
    fn headers(_wide: bool) -> Vec<&'static str> {
        vec!["NAME", "CPU", "MEMORY"]
    }

    fn cells(&self, _wide: bool) -> Vec<String> {
        vec![
            self.name.clone(),
            self.cpu_usage.clone(),
            self.memory_usage.clone(),
        ]
    }
}

/// Labels as `k=v,k2=v2`.
fn label_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `KEY=VALUE` options into a map; a `KEY` alone takes its value from this environment when
/// `from_env` (as `docker run -e KEY` does).
fn pairs(
    option: &str,
    values: &[String],
    from_env: bool,
) -> Result<Option<std::collections::BTreeMap<String, String>>> {
    if values.is_empty() {
        return Ok(None);
    }
    let mut map = std::collections::BTreeMap::new();
    for value in values {
        let (key, value) = match value.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None if from_env => (
                value.clone(),
                std::env::var(value)
                    .with_context(|| format!("{option} {value}: not set in this environment"))?,
            ),
            None => bail!("{option} {value}: expected KEY=VALUE"),
        };
        map.insert(key, value);
    }
    Ok(Some(map))
}

/// Parses `--limit cpu=500m,memory=512Mi` (repeatable) into the API's limits.
pub fn parse_limits(values: &[String]) -> Result<Option<ResourceLimits>> {
    if values.is_empty() {
        return Ok(None);
    }
    let mut limits = ResourceLimits::default();
    for pair in values.iter().flat_map(|v| v.split(',')) {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--limit '{pair}': expected KEY=VALUE"))?;
        let value = Some(value.trim().to_string());
        match key.trim() {
            "cpu" => limits.cpu = value,
            "memory" => limits.memory = value,
            "ephemeral-storage" => limits.ephemeral_storage = value,
            other => bail!("--limit: unknown key '{other}' (use cpu, memory, ephemeral-storage)"),
        }
    }
    Ok(Some(limits))
}

async fn create(ctx: &Context, args: &CreateArgs) -> Result<ExitCode> {
    let timeout = parse_duration(&args.timeout).context("--timeout")?;
    let env_file = match &args.env_file {
        Some(path) if !path.starts_with('/') => Some(
            std::path::absolute(path)
                .with_context(|| format!("--env-file {path}"))?
                .display()
                .to_string(),
        ),
        other => other.clone(),
    };
    let request = CreateSandboxRequest {
        name: Some(args.name.clone()),
        image: Some(args.image.clone()),
        namespace: Some(args.ns.namespace.clone()),
        env_file,
        before_script: args.before_script.clone(),
        limits: parse_limits(&args.limits)?,
        egress_whitelist: if args.no_egress {
            Some(Vec::new())
        } else if args.egress.is_empty() {
            None
        } else {
            Some(args.egress.clone())
        },
        pod_non_root: args.non_root,
        container_non_root: args.container_non_root,
        cap_drop: (!args.cap_drop.is_empty()).then(|| args.cap_drop.clone()),
        cap_add: (!args.cap_add.is_empty()).then(|| args.cap_add.clone()),
        backend: args.backend.clone(),
        env: pairs("--env", &args.env, true)?,
        entrypoint: match &args.entrypoint {
            Some(text) => Some(
                shlex::split(text)
                    .with_context(|| format!("--entrypoint {text}: unbalanced quotes"))?,
            ),
            None => None,
        },
        cmd: (!args.cmd.is_empty()).then(|| args.cmd.clone()),
        labels: pairs("--label", &args.labels, false)?,
        ttl_seconds: super::update::seconds("--ttl", args.ttl.as_deref())?,
        idle_timeout_seconds: super::update::seconds(
            "--idle-timeout",
            args.idle_timeout.as_deref(),
        )?,
    };
    let created = ctx.client.create_sandbox(&request).await?;
    if args.no_wait {
        ctx.printer.status(&format!(
            "sandbox/{} created (not waiting for Ready)",
            created.name
        ));
        let sandbox = ctx
            .client
            .get_sandbox(&created.name, &created.namespace)
            .await?;
        ctx.printer.detail(&sandbox)?;
        return Ok(ExitCode::SUCCESS);
    }
    let bar = ctx
        .printer
        .spinner(format!("creating sandbox/{}", created.name));
    let started = Instant::now();
    let sandbox = loop {
        let sandbox = ctx
            .client
            .get_sandbox(&created.name, &created.namespace)
            .await?;
        match sandbox.status {
            SandboxStatus::Running if sandbox.ready == "True" => break sandbox,
            SandboxStatus::Failed => {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                bail!("sandbox {} failed: {}", sandbox.name, sandbox.error_message);
            }
            _ if started.elapsed() > timeout => {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                let why = if sandbox.error_message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", sandbox.error_message)
                };
                bail!(
                    "sandbox {} is not Ready after {:?} (status {}){why}",
                    sandbox.name,
                    timeout,
                    sandbox.status
                );
            }
            // Sandboxes are usually Ready within tens of milliseconds: poll fast at first.
            _ => {
                // What it waits for, as the platform says (e.g. the kubelet's reason).
                if let Some(bar) = &bar {
                    bar.set_message(if sandbox.error_message.is_empty() {
                        format!("creating sandbox/{}", sandbox.name)
                    } else {
                        format!(
                            "creating sandbox/{} ({})",
                            sandbox.name, sandbox.error_message
                        )
                    });
                }
                let pause = if started.elapsed() < Duration::from_secs(2) {
                    5
                } else {
                    100
                };
                tokio::time::sleep(Duration::from_millis(pause)).await
            }
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    ctx.printer.status(&format!(
        "sandbox/{} ready in {:.1}s",
        sandbox.name,
        started.elapsed().as_secs_f64()
    ));
    ctx.printer.detail(&sandbox)?;
    Ok(ExitCode::SUCCESS)
}

/// Asks a yes/no question on the terminal; only `y`/`yes` is yes.
pub(crate) fn confirm(question: &str) -> Result<bool> {
    eprint!("{question} [y/N] ");
    std::io::stderr().flush().ok();
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .context("reading the answer")?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES"))
}

/// Runs a sandbox subcommand.
pub async fn run(ctx: &Context, command: &SandboxCommand) -> Result<ExitCode> {
    match command {
        SandboxCommand::Create(args) => return create(ctx, args).await,
        SandboxCommand::List(args) => {
            let namespace = (!args.all_namespaces).then_some(args.namespace.as_str());
            let sandboxes = ctx
                .client
                .list_sandboxes_selected(namespace, args.selector.as_deref())
                .await?;
            ctx.printer.list(&sandboxes)?;
        }
        SandboxCommand::Get(args) => {
            let sandbox = ctx
                .client
                .get_sandbox(&args.name, &args.ns.namespace)
                .await?;
            ctx.printer.detail(&sandbox)?;
        }
        SandboxCommand::Delete(args) => {
            for name in &args.names {
                let done = ctx.client.delete_sandbox(name, &args.ns.namespace).await?;
                if ctx.printer.is_table() {
                    println!("{}", done.message);
                } else {
                    ctx.printer.structured(&done)?;
                }
            }
        }
        SandboxCommand::DeleteAll(args) => {
            if !args.yes && std::io::stdin().is_terminal() {
                let question = format!(
                    "Delete every sandbox in namespace '{}'? This cannot be undone.",
                    args.ns.namespace
                );
                if !confirm(&question)? {
                    bail!("cancelled");
                }
            }
            let done = ctx.client.delete_all_sandboxes(&args.ns.namespace).await?;
            if ctx.printer.is_table() {
                for r in &done.results {
                    match &r.error {
                        None => println!("deleted {}", r.name),
                        Some(e) => println!("failed  {}: {e}", r.name),
                    }
                }
                ctx.printer.status(&done.message);
                if done.results.iter().any(|r| !r.success) {
                    return Ok(ExitCode::FAILURE);
                }
            } else {
                ctx.printer.structured(&done)?;
            }
        }
        SandboxCommand::Exec(args) => {
            // The API runs the command with `/bin/sh -c`; quote the words so they arrive as given.
            let command = shlex::try_join(args.command.iter().map(String::as_str))
                .context("cannot quote the command for the shell")?;
            if ctx.printer.is_table() {
                return super::stream::exec(
                    ctx,
                    super::stream::StreamArgs {
                        name: &args.name,
                        namespace: &args.ns.namespace,
                        command,
                        stdin: args.stdin,
                        tty: args.tty,
                        timeout: args.timeout,
                    },
                )
                .await;
            }
            if args.stdin || args.tty {
                bail!("-i and -t stream the command: they go without -o json|yaml");
            }
            let request = ExecRequest {
                command: Some(command),
                timeout_seconds: args.timeout,
            };
            let result = ctx
                .client
                .exec_sandbox(&args.name, &args.ns.namespace, &request)
                .await?;
            ctx.printer.structured(&result)?;
            let code = if (0..=255).contains(&result.exit_code) {
                result.exit_code as u8
            } else {
                1
            };
            return Ok(ExitCode::from(code));
        }
        SandboxCommand::Cp(args) => return super::cp::run(ctx, args).await,
        SandboxCommand::Update(args) => return super::update::run(ctx, args).await,
        SandboxCommand::Logs(args) => {
            let since = match &args.since {
                Some(text) => parse_duration(text).context("--since")?.as_secs(),
                None => 0,
            };
            let query = LogsQuery {
                namespace: Some(args.ns.namespace.clone()),
                container: args.container.clone(),
                tail: args.tail,
                since,
                follow: args.follow,
            };
            if args.follow {
                if !ctx.printer.is_table() {
                    bail!("-f streams the log as text: it goes without -o json|yaml");
                }
                let mut chunks = ctx.client.follow_logs(&args.name, &query).await?;
                let mut stdout = std::io::stdout();
                while let Some(chunk) = chunks.recv().await {
                    stdout.write_all(&chunk?)?;
                    stdout.flush()?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            let logs = ctx.client.sandbox_logs(&args.name, &query).await?;
            if ctx.printer.is_table() {
                print!("{}", logs.logs);
            } else {
                ctx.printer.structured(&logs)?;
            }
        }
        SandboxCommand::Pause(args) => {
            let snapshot = args.snapshot.as_ref().map(|name| {
                if name.is_empty() {
                    format!("{}-paused-{}", args.name, now_unix())
                } else {
                    name.clone()
                }
            });
            let request = PauseRequest {
                namespace: Some(args.ns.namespace.clone()),
                snapshot,
            };
            let done = ctx.client.pause_sandbox(&args.name, &request).await?;
            ctx.printer.status(&done.message);
        }
        SandboxCommand::Fork(args) => {
            let request = ForkRequest {
                new_name: Some(args.new_name.clone()),
                namespace: Some(args.ns.namespace.clone()),
                snapshot: args.snapshot.clone(),
                warm: args.warm,
            };
            let (forked, took) = ctx
                .printer
                .waiting(
                    format!("forking sandbox/{} into {}", args.source, args.new_name),
                    ctx.client.fork_sandbox(&args.source, &request),
                )
                .await;
            let forked = forked?;
            ctx.printer
                .status(&format!("{} in {:.1}s", forked.message, took.as_secs_f64()));
            let sandbox = ctx
                .client
                .get_sandbox(&forked.name, &forked.namespace)
                .await?;
            ctx.printer.detail(&sandbox)?;
        }
        SandboxCommand::Snapshot(args) => {
            let request = CreateSnapshotRequest {
                snapshot_name: Some(args.snapshot.clone()),
                namespace: Some(args.ns.namespace.clone()),
            };
            let done = ctx.client.snapshot_sandbox(&args.name, &request).await?;
            if ctx.printer.is_table() {
                println!(
                    "snapshot/{} taken of sandbox/{}",
                    done.name, done.source_sandbox
                );
            } else {
                ctx.printer.structured(&done)?;
            }
        }
        SandboxCommand::Resume(args) => {
            let request = ResumeRequest {
                namespace: Some(args.ns.namespace.clone()),
            };
            let done = ctx.client.resume_sandbox(&args.name, &request).await?;
            ctx.printer.status(&done.message);
        }
        SandboxCommand::Metrics(args) => {
            let metrics = ctx.client.sandbox_metrics(&args.ns.namespace).await?;
            ctx.printer.list(&metrics)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_flags() {
        let limits = parse_limits(&[
            "cpu=500m,memory=512Mi".into(),
            "ephemeral-storage=1Gi".into(),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(limits.cpu.as_deref(), Some("500m"));
        assert_eq!(limits.memory.as_deref(), Some("512Mi"));
        assert_eq!(limits.ephemeral_storage.as_deref(), Some("1Gi"));
        assert!(parse_limits(&[]).unwrap().is_none());
        assert!(parse_limits(&["gpu=1".into()]).is_err());
        assert!(parse_limits(&["cpu".into()]).is_err());
    }
}
