//! Where an attempt's key comes from: fixed in the provider's config, or
//! asked of a source (a face's callable) for each attempt.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::engine::{CallError, CallFailure, Failure};
use crate::providers::ProviderConfig;

/// Why a key source gave no key.
pub enum NoKey {
    /// This attempt fails (an auth failure of this provider's: another
    /// provider has its own key).
    Failed(Failure),
    /// The source ended the call through its interrupter: the attempt
    /// must not go on (the interrupt wins).
    Ended,
}

/// One attempt's request for a key.
pub struct KeyAsk<'a> {
    /// Position of the provider in the call's chain.
    pub position: usize,
    /// Index of the provider among the client's.
    pub provider: usize,
    /// The provider as the call uses it.
    pub config: &'a ProviderConfig,
    /// What the request holds of secrets (to redact from any message).
    pub secrets: &'a [String],
}

/// Where a client's keys come from, for one call.
pub trait KeySource: Sync {
    /// The keys the source of the client's provider `provider` gave
    /// lately, when its key is asked for at each attempt; `None`: its key
    /// is fixed in its config (or it has none).
    fn asked(&self, provider: usize) -> Option<&RecentKeys>;
    /// The key for one attempt. It runs outside the attempt's timeout: a
    /// slow token fetch delays the attempt.
    fn key(&self, ask: KeyAsk<'_>) -> Result<String, NoKey>;
}

/// Every key fixed in its provider's config.
pub struct FixedKeys;

impl KeySource for FixedKeys {
    fn asked(&self, _provider: usize) -> Option<&RecentKeys> {
        None
    }

    fn key(&self, ask: KeyAsk<'_>) -> Result<String, NoKey> {
        Ok(ask.config.api_key.clone().unwrap_or_default())
    }
}

/// The last keys a key source gave, redacted with the current one: a
/// provider may echo an expired one.
#[derive(Default)]
pub struct RecentKeys(Mutex<VecDeque<String>>);

impl RecentKeys {
    /// How many keys before the current one are kept (README: "its last
    /// eight keys are redacted along with the current one"): enough for a
    /// token rotated while calls were in flight, few enough that every echo
    /// is searched for them cheaply.
    const PREVIOUS: usize = 8;

    /// Notes `key` as the current one and returns the keys kept: it and the
    /// `PREVIOUS` distinct keys given before it. A key given again becomes
    /// the newest, so what is dropped is always the one given longest ago.
    pub fn remember(&self, key: &str) -> Vec<String> {
        let mut keys = self.0.lock().unwrap_or_else(|e| e.into_inner());
        keys.retain(|k| k != key);
        keys.push_back(key.to_string());
        while keys.len() > Self::PREVIOUS + 1 {
            keys.pop_front();
        }
        keys.iter().cloned().collect()
    }
}

/// What each chain member's key source raised at its latest attempt
/// (nothing once it gave a key), by position: the error a call raises for
/// that attempt carries it as its cause.
pub struct KeyErrors<E>(Mutex<Vec<Option<E>>>);

impl<E> Default for KeyErrors<E> {
    fn default() -> Self {
        Self(Mutex::new(Vec::new()))
    }
}

impl<E> KeyErrors<E> {
    pub fn set(&self, position: usize, error: Option<E>) {
        let mut slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slots.len() <= position {
            slots.resize_with(position + 1, || None);
        }
        slots[position] = error;
    }

    /// `read` of the error behind `failure`, when its last attempt failed
    /// in the key source.
    pub fn cause_of<T>(&self, failure: &CallFailure, read: impl FnOnce(&E) -> T) -> Option<T> {
        let failed = match &failure.error {
            CallError::Provider(failed) => failed,
            CallError::Deadline {
                last: Some(failed), ..
            } => failed,
            _ => return None,
        };
        let slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slots.get(failed.provider)?.as_ref().map(read)
    }
}

#[cfg(test)]
mod tests {
    use super::RecentKeys;

    #[test]
    fn the_current_key_and_the_eight_before_it_are_kept() {
        let recent = RecentKeys::default();
        let keys: Vec<String> = (0..12).map(|i| format!("key-{i:02}")).collect();
        let mut kept = Vec::new();
        for key in &keys {
            kept = recent.remember(key);
        }
        assert_eq!(kept, keys[3..].to_vec());
    }

    #[test]
    fn a_key_given_again_is_the_newest() {
        let recent = RecentKeys::default();
        let keys: Vec<String> = (0..9).map(|i| format!("key-{i}")).collect();
        for key in &keys {
            recent.remember(key);
        }
        recent.remember("key-0");
        let kept = recent.remember("key-9");
        assert_eq!(kept.first().map(String::as_str), Some("key-2"));
        assert!(kept.iter().any(|k| k == "key-0"));
        assert_eq!(kept.len(), 9);
    }
}
