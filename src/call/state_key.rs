//! A provider's key in the shared state: written by [`StateKey::render`],
//! read back by [`StateKey::parse`], one rule for both.

use crate::providers::{self, Job, ProviderConfig};

/// Where a provider's cooldowns and budget are kept: the part shown to the
/// caller (`cooldowns()`) and the model the call asks for. Apps sharing a
/// fleet state and a provider name but not its model do not cool each
/// other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateKey {
    /// The provider's name; `name/model` when a call names another model
    /// than the provider's (a typo cools only that model); `name:embeddings`
    /// for embeddings (an embeddings 404 never stops chat), and
    /// `name:embeddings/model` for another model than its embedding model.
    pub shown: String,
    pub model: String,
}

impl StateKey {
    /// Between the shown part and the model in a rendered key.
    const SEPARATOR: char = '|';
    const EMBEDDINGS: &'static str = ":embeddings";
    const MEDIA: [providers::MediaKind; 3] = [
        providers::MediaKind::Image,
        providers::MediaKind::Speech,
        providers::MediaKind::Transcription,
    ];

    /// `config`'s key for `job`.
    pub fn of(config: &ProviderConfig, job: &Job) -> Self {
        let model = providers::job_model(config, job).to_string();
        let (kind, default_model) = match job {
            Job::Embed(_) => (Self::EMBEDDINGS, Self::embedding_model(config)),
            Job::Media(request) | Job::MediaStream(request) => (
                request.kind().state_suffix(),
                Self::media_model(config, request.kind()),
            ),
            Job::Chat(_) | Job::Stream(_) => ("", config.model.as_str()),
        };
        let shown = if model == default_model {
            format!("{}{kind}", config.name)
        } else {
            format!("{}{kind}/{model}", config.name)
        };
        Self { shown, model }
    }

    /// A pool member's key in the fleet's busy counts: its name and model.
    pub fn member(config: &ProviderConfig) -> Self {
        Self {
            shown: config.name.clone(),
            model: config.model.clone(),
        }
    }

    pub fn render(&self) -> String {
        format!("{}{}{}", self.shown, Self::SEPARATOR, self.model)
    }

    /// A rendered key read back; `None` for a key not written by `render`.
    pub fn parse(key: &str) -> Option<Self> {
        let (shown, model) = key.split_once(Self::SEPARATOR)?;
        Some(Self {
            shown: shown.to_string(),
            model: model.to_string(),
        })
    }

    /// The model `config`'s media calls of `kind` ask for unless a call
    /// names one.
    fn media_model(config: &ProviderConfig, kind: providers::MediaKind) -> &str {
        let own = match kind {
            providers::MediaKind::Image => &config.image_model,
            providers::MediaKind::Speech => &config.speech_model,
            providers::MediaKind::Transcription => &config.transcription_model,
        };
        own.as_deref().unwrap_or(&config.model)
    }

    /// The model `config`'s embeddings calls ask for unless a call names one.
    fn embedding_model(config: &ProviderConfig) -> &str {
        config.embedding_model.as_deref().unwrap_or(&config.model)
    }

    /// Whether this is a key `config` writes (for its model, its embedding
    /// model, or a call's own `model=`, chat or embeddings).
    pub fn is_of(&self, config: &ProviderConfig) -> bool {
        let Some(rest) = self.shown.strip_prefix(config.name.as_str()) else {
            return false;
        };
        match rest {
            "" => self.model == config.model,
            Self::EMBEDDINGS => self.model == Self::embedding_model(config),
            _ => {
                let media = Self::MEDIA
                    .into_iter()
                    .find(|kind| rest.starts_with(kind.state_suffix()));
                if let Some(kind) = media.filter(|kind| rest == kind.state_suffix()) {
                    return self.model == Self::media_model(config, kind);
                }
                // A call's own model=: the key names it.
                let kind = media.map_or(Self::EMBEDDINGS, providers::MediaKind::state_suffix);
                rest.strip_prefix(kind).unwrap_or(rest).starts_with('/')
            }
        }
    }
}
