//! Who may call the agent: a ServiceAccount token for the agent's audience, of one of the
//! allowed service accounts, as the API server says in a TokenReview. Accepted tokens are kept
//! (by their SHA-256, never the token) for a minute, so that a burst of calls costs one review;
//! refusals are not kept, and a review the API server cannot answer refuses the call.
//! Every review costs the API server a request, so each client address may have at most
//! [`TokenReviewer::new`]'s `per_minute` tokens reviewed a minute (a token bucket per address);
//! beyond, calls with a token not accepted already are refused without a review (429). The
//! service's own calls are reviewed once per token and minute, far below the bound.
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// How long an accepted token is trusted without a new review (a revoked token, e.g. of a
/// deleted Pod, is refused within this bound).
const ACCEPTED_FOR: Duration = Duration::from_secs(60);
/// Accepted tokens kept at most (more are reviewed again).
const KEPT_AT_MOST: usize = 256;
/// Reviews per client address and minute by default (`sbx agent --reviews-per-minute`).
pub const REVIEWS_PER_MINUTE: u32 = 30;
/// Client addresses tracked before the idle ones are forgotten.
const ADDRESSES_KEPT: usize = 4096;

/// Why a call was refused.
#[derive(Debug)]
pub enum Refused {
    /// The token is not one of an allowed caller for this audience.
    Denied(String),
    /// The API server could not review it.
    Unavailable(String),
    /// This client address had too many tokens reviewed lately: try again after this long.
    Limited(Duration),
}

/// Reviews callers' tokens with the API server.
pub struct TokenReviewer {
    client: kube::Client,
    audience: String,
    /// Allowed usernames, `system:serviceaccount:NAMESPACE:NAME`.
    allowed: Vec<String>,
    accepted: Mutex<HashMap<[u8; 32], Instant>>,
    reviews: DefaultKeyedRateLimiter<IpAddr>,
}

impl TokenReviewer {
    /// A reviewer for tokens of `audience` from the service accounts `callers`
    /// (`NAMESPACE/NAME`), reviewing at most `per_minute` tokens a minute per client address.
    pub fn new(
        client: kube::Client,
        audience: &str,
        callers: &[String],
        per_minute: NonZeroU32,
    ) -> TokenReviewer {
        TokenReviewer {
            client,
            audience: audience.to_string(),
            allowed: callers
                .iter()
                .map(|c| format!("system:serviceaccount:{}", c.replacen('/', ":", 1)))
                .collect(),
            accepted: Mutex::new(HashMap::new()),
            reviews: RateLimiter::keyed(Quota::per_minute(per_minute)),
        }
    }

    /// Accepts `token`, sent from `peer`, or says why not.
    pub async fn review(&self, token: &str, peer: IpAddr) -> Result<(), Refused> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        {
            let mut accepted = self.accepted.lock().expect("token cache lock");
            match accepted.get(&digest) {
                Some(until) if *until > now => return Ok(()),
                Some(_) => {
                    accepted.remove(&digest);
                }
                None => {}
            }
        }
        if self.reviews.len() > ADDRESSES_KEPT {
            self.reviews.retain_recent();
        }
        if let Err(not_until) = self.reviews.check_key(&peer) {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            tracing::debug!(%peer, "too many tokens to review from one address: refused unreviewed");
            return Err(Refused::Limited(wait));
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Refused::Unavailable(e.to_string()))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(Refused::Denied(format!(
                "the token is not valid for audience {}",
                self.audience
            )));
        }
        let audiences = status.audiences.unwrap_or_default();
        if !audiences.iter().any(|a| a == &self.audience) {
            return Err(Refused::Denied(format!(
                "the token is not valid for audience {}",
                self.audience
            )));
        }
        let user = status.user.and_then(|u| u.username).unwrap_or_default();
        if !self.allowed.contains(&user) {
            tracing::warn!(%user, "a token of a caller that is not allowed");
            return Err(Refused::Denied(format!("{user} may not call this agent")));
        }
        let mut accepted = self.accepted.lock().expect("token cache lock");
        if accepted.len() >= KEPT_AT_MOST {
            accepted.retain(|_, until| *until > now);
            if accepted.len() >= KEPT_AT_MOST {
                accepted.clear();
            }
        }
        accepted.insert(digest, now + ACCEPTED_FOR);
        Ok(())
    }
}
