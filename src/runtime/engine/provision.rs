//! Provisioning a sandbox: a fresh create (image, root filesystem, bundle, the shim and the
//! runtime's create, the network, start), a warm fork's restore, or the start of a container
//! the pool prepared.
use super::*;

impl Sbxd {
    /// Creates and starts a sandbox: image, network, root filesystem, bundle, shim, start.
    /// On failure, everything made so far is removed again.
    pub async fn provision(&self, spec: &SandboxSpec) -> Result<Started, RuntimeError> {
        self.provision_from(spec, None).await
    }

    /// Like [`Sbxd::provision`]; with `checkpoint`, the sandbox's processes are restored from
    /// those CRIU images (a warm fork) instead of started afresh.
    pub async fn provision_from(
        &self,
        spec: &SandboxSpec,
        checkpoint: Option<&Path>,
    ) -> Result<Started, RuntimeError> {
        match self.provision_inner(spec, checkpoint).await {
            Ok(started) => Ok(started),
            Err(e) => {
                if let Err(cleanup) = self.teardown(spec, false).await {
                    tracing::warn!(sandbox = %spec.id, error = %cleanup, "clean-up after a failed create");
                }
                Err(e)
            }
        }
    }

    async fn provision_inner(
        &self,
        spec: &SandboxSpec,
        checkpoint: Option<&Path>,
    ) -> Result<Started, RuntimeError> {
        if checkpoint.is_none() {
            if let Some(prepared) = self.pool.take_claimed(&spec.id) {
                return self.start_prepared(spec, prepared).await;
            }
        }
        self.provision_fresh(spec, checkpoint).await
    }

    /// Every step of a create, or of a warm fork's restore.
    async fn provision_fresh(
        &self,
        spec: &SandboxSpec,
        checkpoint: Option<&Path>,
    ) -> Result<Started, RuntimeError> {
        let mut phases = Phases::start();
        let image = self.images.ensure(&spec.image).await?;
        let (egress, network, attachment) = self.network_of(spec).await?;
        let dir = self.dir(&spec.id);
        mkdir_private(&dir)?;
        let _ = std::fs::remove_file(self.exit_path(&spec.id));
        // A prepared sandbox claimed before a crash is this sandbox's now.
        let _ = std::fs::remove_file(dir.join(pool::MARKER));
        self.make_container(
            spec,
            &image,
            network.resolv_conf(),
            Some(attachment.address),
            &mut phases,
        )
        .await?;
        if let (Some(images), Some(map)) = (checkpoint, self.id_map(spec)) {
            checkpoint::open_to_restored_task(images, map)?;
        }
        // The host side of the network needs no process: it is made while the runtime
        // creates the container, and plugged into the container's namespace after.
        let (pid, attachment) = tokio::join!(
            self.spawn_shim(spec, checkpoint),
            self.prepare_network(network, spec, &egress)
        );
        let pid = pid?;
        let attachment = attachment?;
        phases.mark("create");
        network.plug(&attachment, Some(pid as u32)).await?;
        phases.mark("network");
        if checkpoint.is_some() {
            set_hostname(pid, &spec.name).await?;
        } else {
            self.runc.start(&spec.id).await?;
        }
        phases.mark("start");
        tracing::debug!(sandbox = %spec.id, phases = %phases, "provisioned");
        Ok(Started { pid })
    }

    /// Starts a claimed prepared container as the sandbox `spec`: its name, its network,
    /// the runtime's start. One whose image reference names another image by now is
    /// replaced by a fresh create.
    async fn start_prepared(
        &self,
        spec: &SandboxSpec,
        prepared: Prepared,
    ) -> Result<Started, RuntimeError> {
        let mut phases = Phases::start();
        let image = self.images.ensure(&spec.image).await?;
        let pid = prepared.pid;
        if image.digest != prepared.image_digest || !process::alive(pid) {
            tracing::info!(sandbox = %spec.id, "the prepared sandbox is out of date (its image changed or it died): creating afresh");
            self.pool.discarded();
            self.teardown_id(&spec.id, true).await?;
            return self.provision_fresh(spec, None).await;
        }
        let dir = self.dir(&spec.id);
        std::fs::remove_file(dir.join(pool::MARKER))
            .map_err(|e| RuntimeError::io("claim a prepared sandbox", e))?;
        let (egress, network, attachment) = self.network_of(spec).await?;
        // In place: the container has these files bind-mounted since its create.
        write_etc_files(
            &dir.join("etc"),
            network.resolv_conf(),
            Some(attachment.address),
            &spec.name,
        )?;
        phases.mark("claim");
        let (named, attachment) = tokio::join!(
            set_hostname(pid, &spec.name),
            self.prepare_network(network, spec, &egress)
        );
        named?;
        let attachment = attachment?;
        network.plug(&attachment, Some(pid as u32)).await?;
        phases.mark("network");
        self.runc.start(&spec.id).await?;
        phases.mark("start");
        tracing::debug!(sandbox = %spec.id, phases = %phases, "provisioned from the pool");
        Ok(Started { pid })
    }

    /// The sandbox's egress policy, the network manager and its slot's addresses.
    async fn network_of(
        &self,
        spec: &SandboxSpec,
    ) -> Result<(Egress, &NetworkManager, network::Attachment), RuntimeError> {
        let egress = spec.egress_policy()?;
        let network = self.network().await?;
        let attachment = network.attachment(&spec.id, spec.slot)?;
        Ok((egress, network, attachment))
    }

    /// The host side of the sandbox's network (veth, addresses, rules), to be plugged into
    /// its namespace.
    async fn prepare_network(
        &self,
        network: &NetworkManager,
        spec: &SandboxSpec,
        egress: &Egress,
    ) -> Result<network::Attachment, RuntimeError> {
        match network.prepare(&spec.id, spec.slot, egress).await {
            // The platform gives each slot to one sandbox at a time: whatever holds it is
            // left over from a removal a crash or a failure cut short. A dirty slot is
            // cleaned, never a failed sandbox.
            Err(NetworkError::SlotInUse(slot)) => {
                tracing::warn!(sandbox = %spec.id, slot, "the sandbox's network slot held objects no sandbox owns; removing them");
                network.clear_slot(slot).await?;
                Ok(network.prepare(&spec.id, spec.slot, egress).await?)
            }
            other => Ok(other?),
        }
    }

    /// The container's files, up to its runtime config: `/etc` files (with `address` when
    /// the sandbox has one yet), the root filesystem, the bundle. The sandbox dir exists.
    pub(super) async fn make_container(
        &self,
        spec: &SandboxSpec,
        image: &Image,
        resolv_conf: String,
        address: Option<std::net::Ipv4Addr>,
        phases: &mut Phases,
    ) -> Result<(), RuntimeError> {
        let entrypoint = spec.entrypoint.as_ref().unwrap_or(&image.config.entrypoint);
        // As in Kubernetes: a new entrypoint drops the image's cmd unless cmd is given too.
        let cmd = match (&spec.entrypoint, &spec.cmd) {
            (_, Some(cmd)) => cmd,
            (Some(_), None) => &Vec::new(),
            (None, None) => &image.config.cmd,
        };
        let args: Vec<String> = entrypoint.iter().chain(cmd.iter()).cloned().collect();
        if args.is_empty() {
            return Err(RuntimeError::Invalid(format!(
                "image {} has no entrypoint or cmd to run",
                spec.image
            )));
        }
        let dir = self.dir(&spec.id);
        let etc = dir.join("etc");
        mkdir_private(&etc)?;
        let etc_files = write_etc_files(&etc, resolv_conf, address, &spec.name)?;
        let id_map = self.id_map(spec);
        if let Some(map) = id_map {
            give_way_in(&[&dir, &etc], map)?;
        }

        let rootfs = RootFs::under(&dir);
        let owner = match id_map {
            Some(map) => Some((map.host_id(spec.uid), map.host_id(spec.gid))),
            None => (spec.uid != 0).then_some((spec.uid, spec.gid)),
        };
        let lowers = self.lowers(spec, image)?;
        let mount_rootfs = {
            let (rootfs, dir) = (rootfs.clone(), dir.clone());
            tokio::task::spawn_blocking(move || lowers.mount(&dir, &rootfs, owner))
        };
        phases.mark("prepare");
        let views = mount_rootfs
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))??;
        if let Some(views) = views {
            // The overlay holds its layers: the views go, without the create waiting.
            tokio::task::spawn_blocking(move || idmap::remove_view_set(&views));
        }
        phases.mark("rootfs");

        let capabilities = spec
            .capabilities
            .iter()
            .map(|c| bundle::parse_capability(c).map_err(RuntimeError::Invalid))
            .collect::<Result<Vec<_>, _>>()?;
        let config = BundleConfig {
            hostname: spec.name.clone(),
            rootfs: rootfs.merged.clone(),
            args,
            env: bundle::merge_env(&[&image.config.env, &spec.env]),
            cwd: image
                .config
                .working_dir
                .clone()
                .filter(|d| d.starts_with('/'))
                .unwrap_or_else(|| "/".to_string()),
            uid: spec.uid,
            gid: spec.gid,
            additional_gids: spec.additional_gids.clone(),
            capabilities,
            cpu_millis: spec.cpu_millis,
            memory_bytes: spec.memory_bytes,
            netns: None,
            id_map,
            cgroups_path: cgroup::cgroups_path(&spec.id),
            etc_files,
        };
        let oci = bundle::spec(&config)?;
        let json = serde_json::to_vec(&oci).map_err(|e| RuntimeError::Spec(e.to_string()))?;
        write_private(&dir.join("bundle").join("config.json"), &json)?;
        phases.mark("bundle");
        Ok(())
    }

    /// Starts the sandbox's shim, which creates the container (or, with `restore_from`,
    /// restores it from a CRIU checkpoint); returns the container init's pid.
    pub(super) async fn spawn_shim(
        &self,
        spec: &SandboxSpec,
        restore_from: Option<&Path>,
    ) -> Result<i32, RuntimeError> {
        let dir = self.dir(&spec.id);
        let shim_log = std::fs::File::create(dir.join("shim.log"))
            .map_err(|e| RuntimeError::io("create shim log", e))?;
        let mut cmd = tokio::process::Command::new(&self.shim_exe);
        cmd.arg("shim")
            .arg("--id")
            .arg(&spec.id)
            .arg("--bundle")
            .arg(dir.join("bundle"))
            .arg("--runtime")
            .arg(self.runc.binary())
            .arg("--root")
            .arg(self.runc.root())
            .arg("--log")
            .arg(self.log_path(&spec.id))
            .arg("--max-log-bytes")
            .arg(self.config.max_log_bytes.to_string())
            .arg("--exit-file")
            .arg(self.exit_path(&spec.id))
            .arg("--criu")
            .arg(&self.config.criu)
            .env_remove("SBX_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(shim_log))
            .kill_on_drop(false);
        if let Some(images) = restore_from {
            cmd.arg("--restore-from").arg(images);
        }
        if let Some(map) = self.id_map(spec) {
            cmd.arg("--stdio-owner").arg(map.host_id(0).to_string());
        }
        if let (Some(_), Some(run)) = (restore_from, self.checkpoints.private_run()) {
            cmd.arg("--criu-run").arg(run.dir());
        }
        // SAFETY: setsid is async-signal-safe; the shim must leave the daemon's session so
        // that it survives the daemon.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| RuntimeError::io("start the sandbox shim", e))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| RuntimeError::Unavailable("shim has no stdout".into()))?;
        let shim_pid = child.id().unwrap_or(0);
        std::fs::write(dir.join("shim.pid"), shim_pid.to_string())
            .map_err(|e| RuntimeError::io("write shim pid", e))?;
        // The shim runs on after we stop waiting for it; reap it when it ends.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let mut line = String::new();
        let read = tokio::time::timeout(
            Duration::from_secs(60),
            BufReader::new(stdout).read_line(&mut line),
        )
        .await;
        match read {
            Ok(Ok(_)) => {}
            _ => {
                return Err(RuntimeError::Unavailable(
                    "the sandbox shim did not report".into(),
                ));
            }
        }
        match serde_json::from_str::<ShimReport>(line.trim()) {
            Ok(ShimReport::Created { pid }) => Ok(pid),
            Ok(ShimReport::Failed { error }) => Err(RuntimeError::Command {
                command: format!("{} create", self.runc.kind().binary()),
                message: error,
            }),
            Err(_) => Err(RuntimeError::Corrupt(format!(
                "unexpected shim report: {}",
                line.trim()
            ))),
        }
    }
}

/// With user namespaces the runtime sets up mounts as the sandbox's root, an unprivileged
/// host id, which needs its way into the sandbox dir and its `etc` (the bind-mount sources).
/// It gets search permission through the group (owner host root, group the sandbox's root,
/// 0710) and nothing else: it cannot create, rename or replace anything in them, such as the
/// `bundle/` and `config.json` the daemon hands to the runtime, or the writable layer's dir.
pub(super) fn give_way_in(dirs: &[&Path], map: IdMap) -> Result<(), RuntimeError> {
    use std::os::unix::fs::PermissionsExt;
    let group = Some(nix::unistd::Gid::from_raw(map.host_id(0)));
    for dir in dirs {
        nix::unistd::chown(*dir, Some(nix::unistd::Uid::from_raw(0)), group)
            .map_err(|e| RuntimeError::io("chown the sandbox dir", e.into()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o710))
            .map_err(|e| RuntimeError::io("chmod the sandbox dir", e))?;
    }
    Ok(())
}

/// Where a provisioning spent its time: each phase's duration, in order (for the debug log).
pub(super) struct Phases {
    last: Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Phases {
    pub(super) fn start() -> Phases {
        Phases {
            last: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` now.
    pub(super) fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done.push((name, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, took)) in self.done.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{name}={:.1}ms", took.as_secs_f64() * 1000.0)?;
        }
        Ok(())
    }
}

/// Writes the sandbox's `/etc` files into `etc` (in place: a container bind-mounts them)
/// and returns their names and paths. Without an address, `/etc/hosts` names the loopback
/// only.
fn write_etc_files(
    etc: &Path,
    resolv_conf: String,
    address: Option<std::net::Ipv4Addr>,
    name: &str,
) -> Result<Vec<(String, PathBuf)>, RuntimeError> {
    let mut hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n".to_string();
    if let Some(address) = address {
        hosts.push_str(&format!("{address}\t{name}\n"));
    }
    let files = [
        ("resolv.conf", resolv_conf),
        ("hosts", hosts),
        ("hostname", format!("{name}\n")),
    ];
    let mut written = Vec::new();
    for (file, content) in files {
        let path = etc.join(file);
        std::fs::write(&path, content).map_err(|e| RuntimeError::io("write /etc files", e))?;
        written.push((file.to_string(), path));
    }
    Ok(written)
}
