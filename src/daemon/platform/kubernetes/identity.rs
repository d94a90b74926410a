//! The Kubernetes platform's identity seam: API keys as labelled Secrets, role bindings in a
//! ConfigMap, the first admin token in a Secret.
use async_trait::async_trait;

use super::*;
use crate::daemon::platform::IdentityStore;

#[async_trait]
impl IdentityStore for KubernetesPlatform {
    async fn list_keys(&self) -> PlatformResult<Vec<StoredKey>> {
        let secret = self
            .secrets()
            .get_opt(KEYS_SECRET)
            .await
            .map_err(|e| kube_error("read the keys Secret", e))?;
        let mut keys = Vec::new();
        for (id, bytes) in secret.and_then(|s| s.data).unwrap_or_default() {
            let entry: KeyEntry = serde_json::from_slice(&bytes.0)
                .map_err(|e| PlatformError::Store(format!("key {id} in the keys Secret: {e}")))?;
            let mut hash = [0u8; 32];
            hex::decode_to_slice(&entry.secret_sha256, &mut hash)
                .map_err(|e| PlatformError::Store(format!("key {id}: bad hash: {e}")))?;
            keys.push(StoredKey {
                key: entry.key,
                secret_sha256: hash,
            });
        }
        Ok(keys)
    }

    async fn insert_key(&self, key: &StoredKey) -> PlatformResult<()> {
        let entry = KeyEntry {
            key: ApiKey {
                token: None,
                ..key.key.clone()
            },
            secret_sha256: hex::encode(key.secret_sha256),
        };
        let bytes = serde_json::to_vec(&entry).map_err(|e| PlatformError::Store(e.to_string()))?;
        let id = key.key.id.clone();
        self.update_keys(|data| {
            data.insert(id.clone(), ByteString(bytes.clone()));
            Ok(())
        })
        .await
    }

    async fn delete_keys_named(&self, name: &str) -> PlatformResult<Vec<String>> {
        self.update_keys(|data| {
            let ids: Vec<String> = data
                .iter()
                .filter(|(_, v)| {
                    serde_json::from_slice::<KeyEntry>(&v.0).is_ok_and(|e| e.key.name == name)
                })
                .map(|(k, _)| k.clone())
                .collect();
            for id in &ids {
                data.remove(id);
            }
            Ok(ids)
        })
        .await
    }

    async fn touch_key(&self, id: &str, at: i64) -> PlatformResult<()> {
        {
            let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
            if touched.get(id).is_some_and(|last| at - last < TOUCH_EVERY) {
                return Ok(());
            }
            touched.insert(id.to_string(), at);
        }
        self.update_keys(|data| {
            if let Some(bytes) = data.get_mut(id) {
                if let Ok(mut entry) = serde_json::from_slice::<KeyEntry>(&bytes.0) {
                    entry.key.last_used = Some(at);
                    if let Ok(new) = serde_json::to_vec(&entry) {
                        *bytes = ByteString(new);
                    }
                }
            }
            Ok(())
        })
        .await
    }

    async fn role_bindings(&self) -> PlatformResult<RoleBindings> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), SYSTEM_NAMESPACE);
        let map = api
            .get_opt(BINDINGS_CONFIGMAP)
            .await
            .map_err(|e| kube_error("read the role bindings", e))?;
        match map
            .and_then(|m| m.data)
            .and_then(|d| d.get(BINDINGS_KEY).cloned())
        {
            None => Ok(RoleBindings::default()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| PlatformError::Store(format!("unreadable role bindings: {e}"))),
        }
    }

    async fn put_role_bindings(&self, document: &RoleBindings) -> PlatformResult<()> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), SYSTEM_NAMESPACE);
        let text =
            serde_json::to_string(document).map_err(|e| PlatformError::Store(e.to_string()))?;
        let patch = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": BINDINGS_CONFIGMAP, "namespace": SYSTEM_NAMESPACE},
            "data": {BINDINGS_KEY: text},
        });
        api.patch(
            BINDINGS_CONFIGMAP,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map(drop)
        .map_err(|e| kube_error("write the role bindings", e))
    }

    fn key_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.key_changes.receiver())
    }

    async fn store_bootstrap_token(&self, token: &str) -> PlatformResult<String> {
        let patch = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": BOOTSTRAP_SECRET, "namespace": SYSTEM_NAMESPACE},
            "type": "Opaque",
            "stringData": {"token": token},
        });
        self.secrets()
            .patch(
                BOOTSTRAP_SECRET,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|e| kube_error("write the bootstrap Secret", e))?;
        Ok(format!("Secret {SYSTEM_NAMESPACE}/{BOOTSTRAP_SECRET}"))
    }

    async fn lock_bootstrap(&self) -> PlatformResult<HeldLock> {
        super::lease::lock(
            &self.client,
            &self.leases,
            super::lease::BOOTSTRAP_LEASE.to_string(),
            "the first admin key's Lease",
            self.identity.clone(),
            None,
        )
        .await
    }
}
