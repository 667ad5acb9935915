//! Azure OpenAI: Chat Completions (`openai.rs` writes and reads its
//! bodies), with the resource's key in `api-key`, its own request ids, and
//! in the deployments form the deployment named in the path.

use serde_json::{Map, Value};

use super::openai;
use super::types::{ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, ProviderConfig};
use super::types::{MediaKind, MediaRequest, MediaResponse};
use super::wire_format::{MediaAnswer, MediaBody, MediaProblem, Parts, WireFormat};
use crate::stream::{Delta, Frame, Usage};

pub struct Azure;

impl WireFormat for Azure {
    fn build_chat(&self, provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Parts {
        let body = openai::chat_body(provider, model, request);
        (path(provider, model, "/chat/completions"), body, Vec::new())
    }

    fn ask_to_stream(
        &self,
        provider: &ProviderConfig,
        _path: &mut String,
        body: &mut Map<String, Value>,
    ) {
        openai::ask_to_stream(provider, body);
    }

    fn build_embed(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &EmbedRequest,
    ) -> (String, Value) {
        let body = openai::embed_body(provider, model, request);
        (path(provider, model, "/embeddings"), body)
    }

    fn unable(&self, provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
        openai::unable(provider, request)
    }

    fn key_header(&self, entra_token: bool) -> &'static str {
        // An Entra ID token (a callable key) is a bearer token; a resource
        // key goes in `api-key`.
        if entra_token {
            "authorization"
        } else {
            "api-key"
        }
    }

    fn parse(&self, json: &Map<String, Value>) -> Result<ChatResponse, String> {
        openai::parse(json)
    }

    fn error_usage(&self, json: &Value) -> Option<Usage> {
        openai::ChatCompletions.error_usage(json)
    }

    fn parse_embed(&self, json: &Map<String, Value>) -> Result<EmbedResponse, String> {
        openai::parse_embed(json)
    }

    fn no_media(&self, _kind: MediaKind) -> Option<&'static str> {
        None
    }

    fn media_unable(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &MediaRequest,
    ) -> Option<String> {
        super::openai_media::unable(model, request, provider.mistral_rules)
    }

    fn build_media(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &MediaRequest,
    ) -> (String, MediaBody) {
        let (endpoint, body) = super::openai_media::build(provider, model, request);
        (path(provider, model, endpoint), body)
    }

    fn parse_media(
        &self,
        request: &MediaRequest,
        answer: MediaAnswer<'_>,
    ) -> Result<MediaResponse, MediaProblem> {
        super::openai_media::parse(request, answer)
    }

    fn request_id_header(&self) -> &'static str {
        "apim-request-id"
    }

    fn not_found_hint(&self) -> &'static str {
        " (check endpoint: the resource URL, https://NAME.openai.azure.com; \
         and the deployment name)"
    }

    fn stream_event(
        &self,
        frame: &Frame,
        out: &mut Vec<Delta>,
        _extras: &mut Map<String, Value>,
    ) -> Result<(), String> {
        openai::stream_event(frame, out)
    }
}

/// The endpoint path: the deployments form names the deployment in the
/// path (`/deployments/{model}/chat/completions`, the base URL ending in
/// `/openai?api-version=...`); in the v1 form (a base URL ending in
/// `/openai/v1`) the model travels in the body only, as on the rest of the
/// family.
fn path(provider: &ProviderConfig, model: &str, endpoint: &str) -> String {
    let base = provider.base_url.split('?').next().unwrap_or("");
    if base.trim_end_matches('/').ends_with("/v1") {
        endpoint.to_string()
    } else {
        format!("/deployments/{model}{endpoint}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::{authorize, build_embed_request, build_request, key_header_for};
    use super::super::tests::provider;
    use super::super::types::Wire;
    use super::*;

    #[test]
    fn the_deployment_goes_in_the_path_except_in_the_v1_form() {
        let mut p = provider(Wire::Azure);
        p.base_url = "https://r.openai.azure.com/openai?api-version=2024-10-21".into();
        let chat = build_request(&p, &ChatRequest::default());
        assert_eq!(
            chat.url,
            "https://r.openai.azure.com/openai/deployments/m-1/chat/completions?api-version=2024-10-21"
        );
        let embed = build_embed_request(&p, &EmbedRequest::default());
        assert_eq!(
            embed.url,
            "https://r.openai.azure.com/openai/deployments/m-1/embeddings?api-version=2024-10-21"
        );
        p.base_url = "https://r.openai.azure.com/openai/v1/".into();
        let chat = build_request(&p, &ChatRequest::default());
        assert_eq!(
            chat.url,
            "https://r.openai.azure.com/openai/v1/chat/completions"
        );
    }

    #[test]
    fn a_resource_key_goes_in_api_key_and_an_entra_token_as_a_bearer() {
        let mut p = provider(Wire::Azure);
        let sent = authorize(
            &p,
            &build_request(&p, &ChatRequest::default()),
            Some("az-key-1"),
        );
        assert!(sent
            .secret_headers
            .contains(&("api-key".into(), "az-key-1".into())));
        p.entra_token = true;
        let sent = authorize(
            &p,
            &build_request(&p, &ChatRequest::default()),
            Some("tok-1234"),
        );
        assert!(sent
            .secret_headers
            .contains(&("authorization".into(), "Bearer tok-1234".into())));
        assert_eq!(key_header_for(Wire::Azure, false), "api-key");
    }
}
